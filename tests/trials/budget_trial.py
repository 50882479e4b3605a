"""Budget trial: ``llamachat ask`` processes writing checkpoints into one folder at once.

    python -m tests.trials.budget_trial [--asks N] [--rounds N] [--budget BYTES]

``--asks`` slots each run ``--rounds`` asks one after another, every slot at the same
time, each ask a new chat with a long question on a tiny real model, under a
``checkpoints.max_disk`` budget a few of their checkpoints fill. The budget is the
folder's, not a process's (``sessions.checkpoints.budget_lock``): when every process has
ended, the folder's checkpoint files must take at most the budget plus one file per
slot (a write in flight when its process ended), and every ask must have stored its reply.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sessions.checkpoints.listing import list_files
from tests.trials.concurrency import REPO

QUESTION = " ".join(["Tell me about the sea and the boats that sail on it at night."] * 8)


@dataclass
class BudgetReport:
    asks: int
    rounds: int
    budget: int
    runs: int = 0
    replies: int = 0
    on_disk: int = 0
    largest: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        return (f"budget ({self.asks} ask slots x {self.rounds} rounds at once): {self.runs} asks, {self.replies} "
                f"replies stored; checkpoints {self.on_disk} bytes on disk for a budget of {self.budget} (largest "
                f"file {self.largest}); {len(self.failures)} failures ({self.seconds:.1f} s)"
                + "".join(f"\n  {failure}" for failure in self.failures[:5]))


def run_budget_trial(workdir: Path, *, asks: int = 4, rounds: int = 3, budget: int = 60_000) -> BudgetReport:
    from sessions.synth import make_model

    t0 = time.perf_counter()
    report = BudgetReport(asks, rounds, budget)
    (workdir / "config.toml").write_text(f'[checkpoints]\nmax_disk = "{budget}B"\n')
    env = dict(os.environ, LLAMACHAT_DATA_DIR=str(workdir / "data"), LLAMACHAT_CACHE_DIR=str(workdir / "cache"),
               LLAMACHAT_CONFIG=str(workdir / "config.toml"))
    model = str(make_model("llama", "tiny"))
    command = [sys.executable, "-m", "sessions.cli", "ask", "-m", model, "-t", "1", "-c", "1024", "--temp", "0",
               "--max-tokens", "16", "--stats"]
    left = {slot: rounds for slot in range(asks)}
    running: dict[int, subprocess.Popen] = {}
    while left or running:
        for slot in [s for s in left if s not in running]:
            question = f"Question {slot}.{left[slot]}: {QUESTION}"  # each its own checkpoints
            running[slot] = subprocess.Popen([*command, question], cwd=REPO, env=env, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True)
            left[slot] -= 1
            if not left[slot]:
                del left[slot]
        slot, proc = next(iter(running.items()))
        out, err = proc.communicate(timeout=300)
        del running[slot]
        report.runs += 1
        stats = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
        if proc.returncode != 0 or not stats:
            report.failures.append(f"ask in slot {slot} ended with {proc.returncode}: {err.strip()[-200:]}")
        else:
            report.replies += 1
    files = list_files(workdir / "cache" / "checkpoints", headers=False)
    report.on_disk = sum(f.size for f in files)
    report.largest = max((f.size for f in files), default=0)
    if not files or report.runs * report.largest < 2 * budget:
        report.failures.append("the asks wrote less than twice the budget: the trial tested nothing")
    if report.on_disk > budget + asks * report.largest:
        report.failures.append(f"{report.on_disk} bytes of checkpoints for a budget of {budget} and {asks} writers")
    report.seconds = time.perf_counter() - t0
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.trials.budget_trial", description=__doc__.splitlines()[0])
    parser.add_argument("--asks", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=60_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="llamachat-budget-") as work:
        report = run_budget_trial(Path(work), asks=args.asks, rounds=args.rounds, budget=args.budget)
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
