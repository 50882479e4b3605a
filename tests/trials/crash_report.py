"""The crash trials' tally: what was killed where, what was checked, what failed.

Counts are kept as the trials run so that a run cut short (or a failing CI test) still
says how far it got, and the JSON form is what the README's figures are taken from.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .children import ChildResult, KillPlan
from .crash_checks import CheckpointScan

MAX_DETAILS = 50


@dataclass
class Report:
    seed: int
    trials: int = 0
    kills: int = 0
    kills_by_kind: Counter = field(default_factory=Counter)
    kills_by_point: Counter = field(default_factory=Counter)
    not_killed: Counter = field(default_factory=Counter)
    """Planned kills that never happened (the point was not reached n times, the child
    finished before the delay or printed fewer characters): the trial still ran its checks."""
    timed_kills_with_output: int = 0
    """Timed and characters kills that struck after the reply had started."""
    models: Counter = field(default_factory=Counter)
    ops: Counter = field(default_factory=Counter)
    checks: Counter = field(default_factory=Counter)
    temp_files_left_by_kills: int = 0
    temp_files_cleaned: int = 0
    checkpoint_problems: int = 0
    bad_checkpoint_files: int = 0
    check_runs_restoring: int = 0
    """Check replies that restored tokens from checkpoints left by the killed run and
    earlier ones (the rest had nothing usable on disk, e.g. after a kill at start-up)."""
    check_tokens_restored: int = 0
    logits_tokens_restored: int = 0
    """Tokens the in-process logits comparison restored from the killed runs' files."""
    failures: int = 0
    failures_by_model: Counter = field(default_factory=Counter)
    current_model: str = "set-up"
    """The model of the trial being checked (failures are counted against it)."""
    failure_details: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def count_trial(self, arch: str, op: str, plan: KillPlan, result: ChildResult) -> None:
        self.trials += 1
        self.current_model = arch
        self.models[arch] += 1
        self.ops[op] += 1
        if result.killed and not result.timed_out:
            self.kills += 1
            self.kills_by_kind[plan.kind] += 1
            self.kills_by_point[plan.label] += 1
            if plan.kind != "hook" and result.stdout:
                self.timed_kills_with_output += 1
        else:
            self.not_killed[plan.label] += 1

    def fail(self, trial: int, message: str) -> None:
        self.failures += 1
        self.failures_by_model[self.current_model] += 1
        if len(self.failure_details) < MAX_DETAILS:
            self.failure_details.append(message)

    def checkpoint_scan(self, trial: int, where: str, scan: CheckpointScan) -> None:
        self.checks["checkpoint_scans"] += 1
        self.checks["checkpoint_files_verified"] += scan.verified
        self.temp_files_left_by_kills += scan.temp_before
        self.temp_files_cleaned += max(0, scan.temp_before - scan.temp_after)
        self.checkpoint_problems += len(scan.problems or [])
        self.bad_checkpoint_files += len(scan.bad or [])
        for message in (scan.problems or []) + (scan.bad or []):
            self.fail(trial, f"{where}: checkpoint problem: {message}")

    def greedy(self, restored: int, fresh_restored: int) -> None:
        self.checks["greedy_replies_compared"] += 1
        self.check_tokens_restored += restored
        self.check_runs_restoring += restored > 0
        if fresh_restored:
            self.fail(self.trials, f"the from-scratch run restored {fresh_restored} tokens")

    def logits(self, restored: int) -> None:
        self.checks["logits_compared"] += 1
        self.logits_tokens_restored += restored

    def as_dict(self) -> dict:
        return {
            "seed": self.seed,
            "trials": self.trials,
            "kills": self.kills,
            "kills_by_kind": dict(self.kills_by_kind),
            "kills_by_point": dict(sorted(self.kills_by_point.items())),
            "not_killed": dict(self.not_killed),
            "timed_kills_with_output": self.timed_kills_with_output,
            "models": dict(self.models),
            "ops": dict(self.ops),
            "checks": dict(self.checks),
            "temp_files_left_by_kills": self.temp_files_left_by_kills,
            "temp_files_cleaned": self.temp_files_cleaned,
            "checkpoint_problems": self.checkpoint_problems,
            "bad_checkpoint_files": self.bad_checkpoint_files,
            "check_runs_restoring": self.check_runs_restoring,
            "check_tokens_restored": self.check_tokens_restored,
            "logits_tokens_restored": self.logits_tokens_restored,
            "failures": self.failures,
            "failures_by_model": dict(self.failures_by_model),
            "failure_details": self.failure_details,
            "seconds": self.seconds,
        }

    def summary(self) -> str:
        points = ", ".join(f"{k} {v}" for k, v in sorted(self.kills_by_point.items()))
        checks = ", ".join(f"{k} {v}" for k, v in sorted(self.checks.items()))
        lines = [
            f"{self.trials} trials, {self.kills} kills in {self.seconds:.0f} s (seed {self.seed})",
            f"kills by point: {points}",
            f"models: {dict(self.models)}; gestures: {dict(self.ops)}",
            f"checks: {checks}",
            f"checkpoint temp files left by kills {self.temp_files_left_by_kills}, cleaned "
            f"{self.temp_files_cleaned}; problems {self.checkpoint_problems}, bad files "
            f"{self.bad_checkpoint_files}",
            f"check replies restoring from disk: {self.check_runs_restoring} "
            f"({self.check_tokens_restored} tokens); logits comparisons restored "
            f"{self.logits_tokens_restored} tokens",
            f"failures: {self.failures} {dict(self.failures_by_model) if self.failures else ''}",
            *(f"  {detail}" for detail in self.failure_details),
        ]
        return "\n".join(lines)
