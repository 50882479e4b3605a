"""Crash trials: kill ``llamachat ask`` with SIGKILL at random moments, then check.

    python -m tests.trials.crash [--kills N] [--seed S] [--json] [--workdir DIR] [--depth-cap N]

One long session per tiny made model (llama mostly, gemma3, lfm2 and mamba for a
share) keeps growing through continues, forks, edits and regenerations, each run as a
child process that is killed at a crash point (``sessions.crashpoints``), after a
random delay, or once it has printed part of its reply. After every trial:

- the database opens with no repair, and every message seen before is still there with
  the same text; a kill just before or after ``add_message``'s commit leaves exactly the
  messages whose commit had (or had not) returned; a completed run stored its reply;
- every new reply's text is its sampled tokens read again with the model's vocabulary
  (``ReplyTexts``), so no cut or continue leaves text that is not what the model wrote;
- the checkpoint folder opens as after a restart with no problem reported, and every
  file under a final name passes full verification (temp files of killed writers go);
- the next greedy reply, restored from whatever the kill left on disk, is identical to
  one computed from scratch (a second process on a copy of the database with an empty
  cache folder, so nothing is restored); and since the made models' text barely
  depends on context, the trial process also restores the head branch itself from those
  files and compares logits bit for bit (``crash_exactness``).

The report counts trials, kills by kind and point, checks and failures (exit status 1
when any check failed). ``--kills`` is the number of kills to reach (default 200).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from sessions.synth import make_model

from . import crash_plan
from .children import ChildResult, KillPlan, finish, run_llamachat, start
from .crash_checks import (
    CheckpointScanner,
    DatabaseProblem,
    Heads,
    ReplyTexts,
    StoredMessage,
    copy_database,
    read_database,
)
from .crash_exactness import ExactnessProbe
from .crash_report import Report

MODELS: dict[str, float] = {"llama": 0.55, "gemma3": 0.15, "lfm2": 0.15, "mamba": 0.15}
"""Share of the trials per model kind."""
CONFIG = "n_ctx = 2048\nn_batch = 16\nthreads = 1\n\n[checkpoints]\ninterval = 32\n"
"""Small batches and a short checkpoint interval: more batches, more files, more commits."""
CHECK_TOKENS = "12"
MAX_COVERAGE_ATTEMPTS = 6


def model_path(arch: str) -> Path:
    return make_model(arch, "tiny", swa_window=32) if arch == "gemma3" else make_model(arch, "tiny")


class CrashTrials:
    """One trial run: its folders, its sessions, the messages it has seen committed."""

    def __init__(self, workdir: Path, seed: int, base_env: dict[str, str],
                 depth_cap: int = crash_plan.DEPTH_CAP) -> None:
        self.rng = random.Random(seed)
        self.depth_cap = depth_cap
        self.work = workdir
        self.db = workdir / "data" / "sessions.sqlite3"
        config = workdir / "config.toml"
        config.write_text(CONFIG)
        self.env = dict(base_env, LLAMACHAT_DATA_DIR=str(workdir / "data"),
                        LLAMACHAT_CACHE_DIR=str(workdir / "cache"), LLAMACHAT_CONFIG=str(config))
        self.models = {arch: str(model_path(arch)) for arch in MODELS}
        self.config = config
        self.sessions: dict[str, int] = {}
        self.confirmed: dict[int, StoredMessage] = {}
        """Every message seen in the database so far: none may vanish or change."""
        self.heads = Heads({}, {})
        self.scanner = CheckpointScanner(workdir / "cache" / "checkpoints")
        self.report = Report(seed=seed)
        self.trial = 0

    # -- running ----------------------------------------------------------------------

    def run(self, kills: int) -> Report:
        self.probe = ExactnessProbe(self.models, self.config)
        self.texts = ReplyTexts(Path(path) for path in self.models.values())
        try:
            return self._run(kills)
        finally:
            self.texts.close()
            self.probe.close()

    def _run(self, kills: int) -> Report:
        t0 = time.monotonic()
        for arch in MODELS:  # one session per model, started by a run that is not killed
            result = run_llamachat(["ask", "-m", self.models[arch], "--temp", "0", "--max-tokens", "8",
                                    "--stats", f"hello from the {arch} trials"], self.env)
            stats = result.stats()
            if stats is None:
                raise RuntimeError(f"the first {arch} run failed: {result.stderr.strip()}")
            self.sessions[arch] = stats["session"]
        self._refresh("set-up")
        for index, kind in enumerate(crash_plan.KILL_KINDS):  # every kind at least once
            arch = list(MODELS)[index % len(MODELS)]
            for _ in range(MAX_COVERAGE_ATTEMPTS):
                if self.run_trial(arch, crash_plan.kill_plan(self.rng, kind, sure=True)):
                    break
            else:
                self.report.fail(self.trial, f"{kind} never killed in {MAX_COVERAGE_ATTEMPTS} tries")
        while self.report.kills < kills:
            arch = self.rng.choices(list(MODELS), weights=list(MODELS.values()))[0]
            self.run_trial(arch, crash_plan.kill_plan(self.rng, crash_plan.random_kind(self.rng)))
        self.report.seconds = round(time.monotonic() - t0, 1)
        return self.report

    def run_trial(self, arch: str, plan: KillPlan) -> bool:
        """One gesture killed as ``plan`` says, then every check; True if it was killed."""
        self.trial += 1
        session = self.sessions[arch]
        op = crash_plan.choose_op(self.rng, self.heads, session, f"trial {self.trial}", self.depth_cap)
        args = ["ask", "-m", self.models[arch], "--session", str(session), "--stats",
                *crash_plan.sampling_args(self.rng), *op.args]
        before = set(self.heads.messages)
        result = run_llamachat(args, self.env, plan)
        self.report.count_trial(arch, op.kind, plan, result)
        where = f"trial {self.trial} ({arch}, {op.kind}, {plan.describe()})"
        if result.timed_out or not (result.killed or result.returncode == 0):
            self.report.fail(self.trial, f"{where}: the child failed: {result.stderr.strip()[-400:]}")
        if not self._refresh(where):
            return result.killed
        new = set(self.heads.messages) - before
        self._check_new(where, plan, op, result, new)
        self.report.checkpoint_scan(self.trial, where, self.scanner.scan())
        self._check_greedy(where, arch, session)
        return result.killed

    # -- checks -------------------------------------------------------------------------

    def _refresh(self, where: str) -> bool:
        """Reopen the database; every confirmed message must be there, unchanged."""
        try:
            heads = read_database(self.db)
        except DatabaseProblem as problem:
            self.report.fail(self.trial, f"{where}: {problem}")
            return False
        self.report.checks["database_opened"] += 1
        for mid, seen in self.confirmed.items():
            self.report.checks["confirmed_messages_checked"] += 1
            if heads.messages.get(mid) != seen:
                self.report.fail(self.trial, f"{where}: message {mid} changed or vanished: "
                                             f"{seen} -> {heads.messages.get(mid)}")
        compared, problems = self.texts.mismatches(self.db, set(heads.messages) - set(self.confirmed))
        self.report.checks["reply_texts_rederived"] += compared
        for problem in problems:
            self.report.fail(self.trial, f"{where}: {problem}")
        self.confirmed.update(heads.messages)
        self.heads = heads
        return True

    def _check_new(self, where: str, plan: KillPlan, op: crash_plan.Op, result: ChildResult,
                   new: set[int]) -> None:
        """How many messages a kill may leave, given where it struck."""
        checks = self.report.checks
        if result.killed and plan.kind == "hook" and plan.point in ("store.before_commit", "store.after_commit"):
            expected = plan.count - (plan.point == "store.before_commit")
            checks["commit_counts"] += 1
            if len(new) != expected:
                self.report.fail(self.trial, f"{where}: {len(new)} new messages, expected {expected}")
        elif result.returncode == 0:
            checks["completed_runs_stored"] += 1
            stats = result.stats() or {}
            reply = self.heads.messages.get(stats.get("message", -1))
            if len(new) != op.expected_new or reply is None or reply.text + "\n" != result.stdout:
                self.report.fail(self.trial, f"{where}: a completed run's messages are not as "
                                             f"reported ({len(new)} new, reply {reply})")
        elif len(new) > op.expected_new:
            self.report.fail(self.trial, f"{where}: {len(new)} new messages from one gesture")

    def _check_greedy(self, where: str, arch: str, session: int) -> None:
        """The next greedy reply after restoring == the same reply computed from scratch."""
        scratch = self.work / "scratch"
        shutil.rmtree(scratch, ignore_errors=True)
        copy_database(self.db, scratch / "data" / "sessions.sqlite3")
        copy_database(self.db, scratch / "probe" / "sessions.sqlite3")
        text = crash_plan.sentence(self.rng, f"check {self.trial}")
        args = ["ask", "-m", self.models[arch], "--session", str(session), "--temp", "0",
                "--max-tokens", CHECK_TOKENS, "--stats", text]
        fresh_env = dict(self.env, LLAMACHAT_DATA_DIR=str(scratch / "data"),
                         LLAMACHAT_CACHE_DIR=str(scratch / "cache"))
        children = [start(args, self.env), start(args, fresh_env)]  # both cores at once
        probe = self.probe.compare(arch, scratch / "probe" / "sessions.sqlite3", session,
                                   self.work / "cache" / "checkpoints", scratch / "probe")
        self.report.logits(probe.tokens_restored)
        if not probe.equal or probe.problems:
            self.report.fail(self.trial, f"{where}: logits after restoring differ from scratch "
                                         f"(max {probe.max_difference:.3g}); problems: {probe.problems}")
        restored, fresh = (finish(child) for child in children)
        stats, fresh_stats = restored.stats(), fresh.stats()
        if stats is None or fresh_stats is None:
            failed = restored if stats is None else fresh
            self.report.fail(self.trial, f"{where}: the check run failed: {failed.stderr.strip()[-400:]}")
            return
        self.report.greedy(stats["tokens_restored"], fresh_stats["tokens_restored"])
        if restored.stdout != fresh.stdout:
            self.report.fail(self.trial, f"{where}: greedy reply after restore {restored.stdout!r} "
                                         f"differs from scratch {fresh.stdout!r}")
        self._refresh(f"{where}, after the check")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.trials.crash", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200, help="kills to reach (default 200)")
    parser.add_argument("--seed", type=int, default=1, help="seed of every random choice")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--workdir", type=Path, help="keep the trial's files here (default: a temp folder)")
    parser.add_argument("--depth-cap", type=int, default=crash_plan.DEPTH_CAP,
                        help="deepest branch (in messages) before a gesture forks near the root")
    args = parser.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="llamachat-crash-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        report = CrashTrials(work, args.seed, dict(os.environ), args.depth_cap).run(args.kills)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(report.as_dict(), indent=2) if args.json else report.summary())
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
