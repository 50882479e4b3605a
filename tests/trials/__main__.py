"""All hardening trials from one command, with one line of totals at the end.

    python -m tests.trials            # the full form: 200 kills, every corruption, 200 faults
    python -m tests.trials --short    # the form CI runs (one kill at each crash point, each fault once)

It runs the crash trials (``tests.trials.crash``), the corruption trials
(``tests.trials.corruption``), the concurrency trials (``tests.trials.concurrency``:
store-level processes, then ``llamachat ask`` processes and the app in
``tests.trials.concurrency_app``), the budget trial (``tests.trials.budget_trial``: ``ask``
processes writing checkpoints into one folder at once) and the fault trials
(``tests.trials.faults``: hang-ups, failed stdout, signals, clock jumps, FIFOs), prints each
report, then one line of totals; exit status 1 when any check failed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from . import crash_plan
from .budget_trial import run_budget_trial
from .concurrency import run_concurrency_trial
from .concurrency_app import run_app_trial
from .corruption import run_corruption_trials, summary
from .crash import CrashTrials
from .faults import CLASSES, run_fault_trials


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.trials", description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="one kill at each crash point instead of 200 kills")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="llamachat-trials-"))
    try:
        (work / "crash").mkdir()
        (work / "corruption").mkdir()
        (work / "concurrency").mkdir()
        crash = CrashTrials(work / "crash", args.seed, dict(os.environ), crash_plan.DEPTH_CAP)
        crash_report = crash.run(len(crash_plan.KILL_KINDS) if args.short else 200)
        print(crash_report.summary())
        corruption = run_corruption_trials(work / "corruption", seed=args.seed)
        print(summary(corruption))
        workers, rounds = (3, 6) if args.short else (6, 40)
        concurrency = run_concurrency_trial(work / "concurrency", workers=workers, rounds=rounds, seed=args.seed)
        print(concurrency.summary())
        (work / "front-ends").mkdir()
        asks, ask_rounds = (2, 2) if args.short else (4, 10)
        front_ends = run_app_trial(work / "front-ends", asks=asks, rounds=ask_rounds, app_rounds=ask_rounds,
                                   seed=args.seed)
        print(front_ends.summary())
        (work / "budget").mkdir()
        budget = run_budget_trial(work / "budget", asks=4, rounds=2 if args.short else 10)
        print(budget.summary())
        (work / "faults").mkdir()
        faults = run_fault_trials(work / "faults", len(CLASSES) if args.short else 200, seed=args.seed)
        print(faults.summary())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    failures = (crash_report.failures + corruption["failures"] + (0 if concurrency.ok else 1)
                + (0 if front_ends.ok else 1) + (0 if budget.ok else 1) + len(faults.failures))
    print(f"trials: {crash_report.trials} crash trials, {crash_report.kills} kills, "
          f"{corruption['corruptions']} corruptions, {concurrency.sent} messages from {workers} processes "
          f"and {front_ends.sent} from {asks} ask slots and the app, {sum(faults.rounds.values())} fault rounds "
          f"({concurrency.lost + front_ends.lost + faults.lost} lost, "
          f"{concurrency.misplaced + front_ends.misplaced + faults.misplaced} misplaced), {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
