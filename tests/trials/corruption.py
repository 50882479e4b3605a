"""Corruption trials: damage every file llamachat keeps, check each is caught and cured.

    python -m tests.trials.corruption [--json] [--seed S] [--archs llama,gemma3,...] [--workdir DIR]

- checkpoint files (``corrupt_checkpoints``): truncated, emptied, grown, bit-flipped in
  the header, the state or the logits, swapped with another segment, or replaced by the
  same segment of another model of the same shape; on every memory kind;
- the session database (``corrupt_database``): a page overwritten, bits flipped in the
  middle, cut in half, emptied, replaced by garbage, with and without messages written
  after the backup, and with the backup damaged too;
- the config file and theme files (``corrupt_settings``).

Each corruption must be detected with a plain-words message and recovered from (a
checkpoint recomputed bit-exactly, the database restored from its backup with nothing
the backup held lost, the settings falling back to defaults). The report counts
corruptions by kind, detected, recovered, data lost and failures; exit status 1 on any
failure.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from . import corrupt_checkpoints, corrupt_database, corrupt_settings

ARCHS = ("llama", "gemma3", "lfm2", "mamba")
AFTER_BACKUP = (0, 12)
"""Messages written after the backup in the database trials (0: the backup is current)."""


def run_corruption_trials(workdir: Path, *, seed: int = 1, archs=ARCHS,
                          database: bool = True, settings: bool = True) -> dict:
    """Run the trials in ``workdir``; returns the report as a dict."""
    rng = random.Random(seed)
    t0 = time.monotonic()
    outcomes: list[tuple[str, str, object]] = []
    for arch in archs:
        trials = corrupt_checkpoints.CheckpointTrials(workdir / "checkpoints", arch, rng)
        try:
            for kind in corrupt_checkpoints.KINDS:
                outcomes.append(("checkpoint", kind, trials.run(kind)))
        finally:
            trials.close()
    if database:
        for kind in corrupt_database.KINDS:
            for after in AFTER_BACKUP:
                outcomes.append(("database", kind, corrupt_database.run_database_trial(
                    workdir / "database", kind, after, rng)))
    if settings:
        for kind in corrupt_settings.CONFIG_KINDS:
            outcomes.append(("config", kind, corrupt_settings.run_config_trial(workdir / "settings", kind)))
        for kind in corrupt_settings.THEME_KINDS:
            outcomes.append(("theme", kind, corrupt_settings.run_theme_trial(workdir / "settings", kind)))
    return _report(outcomes, seed, time.monotonic() - t0)


def _recovered(target: str, outcome) -> bool:
    if target == "checkpoint":
        return outcome.exact and outcome.rewritten
    if target == "database":
        return outcome.recovered
    return outcome.started


def _report(outcomes: list[tuple[str, str, object]], seed: int, seconds: float) -> dict:
    by_kind: Counter = Counter()
    detected: Counter = Counter()
    recovered: Counter = Counter()
    failures: list[dict] = []
    lost_from_backup = salvaged = lost_after_backup = recomputed = refused = 0
    for target, kind, outcome in outcomes:
        name = f"{target}:{kind}"
        by_kind[name] += 1
        detected[target] += outcome.detected
        recovered[target] += _recovered(target, outcome)
        if target == "checkpoint":
            recomputed += outcome.recomputed
        if target == "database":
            lost_from_backup += outcome.lost_from_backup
            salvaged += outcome.salvaged
            lost_after_backup += outcome.lost_after_backup
            refused += outcome.ok and not outcome.recovered
        if not outcome.ok:
            failures.append({"corruption": name, **asdict(outcome)})
    totals = Counter(target for target, _, _ in outcomes)
    examples = {target: next((getattr(o, "report", None) or getattr(o, "notice", None)
                              or getattr(o, "message", None)) for t, _, o in outcomes if t == target)
                for target in totals}
    return {
        "seed": seed,
        "corruptions": len(outcomes),
        "corruptions_by_target": dict(totals),
        "corruptions_by_kind": dict(by_kind),
        "detected": dict(detected),
        "recovered": dict(recovered),
        "checkpoint_tokens_recomputed": recomputed,
        "database_refused_untouched": refused,
        "database_rows_lost_from_backup": lost_from_backup,
        "database_messages_after_backup_salvaged": salvaged,
        "database_messages_after_backup_lost": lost_after_backup,
        "example_messages": examples,
        "failures": len(failures),
        "failure_details": failures,
        "seconds": round(seconds, 1),
    }


def summary(report: dict) -> str:
    lines = [f"{report['corruptions']} corruptions in {report['seconds']:.0f} s (seed {report['seed']})"]
    for target, total in report["corruptions_by_target"].items():
        lines.append(f"  {target}: {total} made, {report['detected'].get(target, 0)} detected, "
                     f"{report['recovered'].get(target, 0)} recovered")
    lines.append(f"checkpoint tokens recomputed: {report['checkpoint_tokens_recomputed']}")
    lines.append(f"database refused with both files untouched (backup damaged too): "
                 f"{report['database_refused_untouched']}")
    lines.append(f"database: rows of the backup lost {report['database_rows_lost_from_backup']}; "
                 f"messages newer than the backup salvaged "
                 f"{report['database_messages_after_backup_salvaged']}, lost "
                 f"{report['database_messages_after_backup_lost']} (each loss told in the notice)")
    lines.append(f"failures: {report['failures']}")
    lines.extend(f"  {failure}" for failure in report["failure_details"])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.trials.corruption",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--seed", type=int, default=1, help="seed of every random choice")
    parser.add_argument("--archs", default=",".join(ARCHS), help="model kinds for the checkpoint trials")
    parser.add_argument("--workdir", type=Path, help="keep the trial's files here (default: a temp folder)")
    args = parser.parse_args(argv)
    archs = tuple(a for a in args.archs.split(",") if a)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="llamachat-corruption-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        report = run_corruption_trials(work, seed=args.seed, archs=archs)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(report, indent=2) if args.json else summary(report))
    return 1 if report["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
