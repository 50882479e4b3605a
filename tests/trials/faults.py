"""Fault trials: ``llamachat ask`` stopped by what happens to real processes, then checked.

    python -m tests.trials.faults [--rounds N] [--seed S]

A seeded random sequence of rounds, one fault each, on one session per tiny made model
(``llama``, and ``mamba`` whose memory is a recurrent state):

- output and signals (``fault_inject``), at a random point of the reply: the terminal
  closed (a real pty whose master is closed: SIGHUP, then EIO; under stdout, or under
  stderr too, when the line saying what was kept is lost with it), a terminal gone without a
  hang-up (EIO alone), stdout on ``/dev/full``, stdout closed, a reader that leaves, and
  SIGINT, SIGTERM or SIGHUP from another process;
- clock jumps (``fault_files``): a backup stamped years ahead, or a clock set back after
  the backup was made, with the backup file's mtime set far ahead or back; a new session
  is asked, and after the next open the backup must hold it; then one more reply, the
  page of the oldest message is overwritten and ``llamachat sessions`` recovers: every
  row the backup held or the damaged file could still read must come back;
- FIFOs where files are read: ``config.toml``, a theme, checkpoint files, and each other
  file of llamachat's own (``fault_own_files``: the recovery notice, the database's
  ``-wal`` and ``-shm``, the lists of recent downloads and probed models, the config for
  ``llamachat config``, the Hugging Face cache read offline). The process must end before
  a deadline (a hang is a failure) with one sentence, or go on without them;
- an undo a recovery must keep (delete, a backup taken by another process, undo, damage,
  recover) and a nearly full data disk (``fault_own_files``).

After each round: the database opens without repair; the question is stored under the
head the session had; its reply is under it, kept as stopped (or complete, when the
fault came after its end) with its text equal to its tokens read again
(``ReplyTexts``); the exit status follows the shell's conventions (128 + the signal,
141 for a reader gone, 1 with one sentence on stderr for a failed stdout, 0 and nothing
said for a complete reply); nothing else in the database changed. ``lost`` counts a
message gone or changed, or a question not stored; ``misplaced`` a message under the
wrong parent, a head moved that should not have, a message from nowhere. Exit status 1
unless lost, misplaced and failures are all 0.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from sessions.stop_reason import StopReason
from sessions.store import SessionStore
from sessions.synth import make_model

from .crash_checks import DatabaseProblem, Heads, ReplyTexts, read_database
from .fault_inject import ASK_FAULTS, STATUS, FaultRun, run_with_fault
from .fault_rounds import FileRounds

MODELS = ("llama", "mamba")
FILE_CLASSES = ("clock-future-stamp", "clock-set-back", "fifo-config", "fifo-theme", "fifo-checkpoint",
                "undo-recovery", "full-data-disk", "fifo-own-files")
CLASSES = (*ASK_FAULTS, *FILE_CLASSES)
CONFIG = "n_ctx = 8192\nthreads = 1\n"
"""One thread: the trial shares its machine; the faults, not the speed, are tested."""
MAX_TOKENS = 1200
TURNS = 5
"""Asks per session before the next starts a new one: 5 turns of ``MAX_TOKENS`` fit ``n_ctx``."""
FAULT_AFTER = 400
"""A fault comes after 1 to this many bytes of the reply; most replies are longer."""


@dataclass
class FaultReport:
    seed: int
    rounds: Counter = field(default_factory=Counter)
    """Rounds per fault class."""
    cut: Counter = field(default_factory=Counter)
    """Per fault of the output or a signal: the rounds it stopped a reply in (the others came
    after the reply's end, or met an empty reply)."""
    stopped: int = 0
    """Replies a fault stopped, kept as stopped."""
    complete: int = 0
    """Replies that ended before their fault came (or that no fault touched)."""
    recoveries: int = 0
    taken_by_damage: int = 0
    """Messages newer than the backup whose row, session or parent the damage destroyed
    (not ours to bring back; the recovery notice must count them)."""
    full_disk: Counter = field(default_factory=Counter)
    """Asks on a nearly full data disk whose question was stored (with its tokens) or refused."""
    fifos: Counter = field(default_factory=Counter)
    """Rounds per file of llamachat's own a FIFO took the place of."""
    skipped: Counter = field(default_factory=Counter)
    """Rounds that could not be played here (a small file system needs mount, as root)."""
    lost: int = 0
    misplaced: int = 0
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures and self.lost == 0 and self.misplaced == 0

    def summary(self) -> str:
        per_class = ", ".join(f"{name} {self.rounds[name]}" + (f" ({self.cut[name]} stopped)" if name in ASK_FAULTS
                                                                 else "") for name in CLASSES)
        return (f"faults (seed {self.seed}): {sum(self.rounds.values())} rounds ({per_class}); "
                f"{self.stopped} replies stopped and kept, {self.complete} complete, {self.recoveries} "
                f"recoveries after a clock jump or an undo ({self.taken_by_damage} newer messages taken by the "
                f"damage itself, each counted in the notice); full data disk: {self.full_disk['stored']} questions "
                f"stored whole, {self.full_disk['refused']} refused whole; FIFOs of own files: "
                f"{', '.join(f'{k} {v}' for k, v in sorted(self.fifos.items())) or 'none'}"
                + (f"; skipped: {dict(self.skipped)}" if self.skipped else "")
                + f"; {self.lost} lost, {self.misplaced} misplaced, "
                f"{len(self.failures)} failures ({self.seconds:.1f} s)"
                + "".join(f"\n  {failure}" for failure in self.failures[:8]))


class FaultTrials:
    """One trial run: its folders, its sessions, the database as the last round left it."""

    def __init__(self, workdir: Path, seed: int, base_env: dict[str, str]) -> None:
        self.rng = random.Random(seed)
        self.db = workdir / "data" / "sessions.sqlite3"
        self.config = workdir / "config" / "config.toml"
        self.config.parent.mkdir(parents=True)
        self.config.write_text(CONFIG)
        self.cache = workdir / "cache"
        self.env = dict(base_env, LLAMACHAT_DATA_DIR=str(self.db.parent), LLAMACHAT_CACHE_DIR=str(self.cache),
                        LLAMACHAT_CONFIG=str(self.config))
        self.models = {arch: str(make_model(arch, "tiny")) for arch in MODELS}
        self.sessions: dict[str, int] = {}
        self.turns: Counter = Counter()
        self.heads = Heads({}, {})
        self.report = FaultReport(seed)
        self.round = 0
        self.files = FileRounds(self, workdir)

    def run(self, rounds: int) -> FaultReport:
        """Every class once in a random order, then random classes up to ``rounds``."""
        order = list(CLASSES)
        self.rng.shuffle(order)
        order += self.rng.choices(CLASSES, k=max(0, rounds - len(order)))
        t0 = time.monotonic()
        self.set_up()
        try:
            self.play(order)
        finally:
            self.close()
        self.report.seconds = time.monotonic() - t0
        return self.report

    def set_up(self) -> None:
        """One session per model, started by an ask that nothing disturbs."""
        self.texts = ReplyTexts(Path(path) for path in self.models.values())
        for arch in MODELS:
            self.start_anew(arch)
            self.ask_in_turn(f"set-up {arch}", arch, None)
            if arch not in self.sessions:
                raise RuntimeError(f"the first {arch} ask failed: {self.report.failures}")

    def play(self, order: list[str]) -> None:
        for name in order:
            self.round += 1
            self.report.rounds[name] += 1
            if name in ASK_FAULTS:
                self.ask_in_turn(name, self.rng.choice(MODELS), name)
            else:
                self.files.run(name)

    def close(self) -> None:
        self.texts.close()

    def fail(self, where: str, what: str) -> None:
        self.report.failures.append(f"round {self.round} ({where}): {what}")

    # -- one ask and its checks -----------------------------------------------------------

    def start_anew(self, arch: str) -> None:
        """The next ask on ``arch`` starts a new session."""
        self.turns[arch] = TURNS

    def ask_in_turn(self, where: str, arch: str, fault: str | None, warning: str | None = None,
                    warnings: range = range(1, 2)) -> None:
        """Ask in ``arch``'s session, or in a new one once it has had ``TURNS`` asks (a
        branch longer than the context is refused before any fault could come)."""
        session = self.sessions[arch] if self.turns[arch] < TURNS else None
        started = self.ask(where, arch, session, fault, warning, warnings)
        if started is not None:
            self.turns[arch] = self.turns[arch] + 1 if session else 1
            self.sessions[arch] = started

    def ask(self, where: str, arch: str, session: int | None, fault: str | None,
            warning: str | None = None, warnings: range = range(1, 2)) -> int | None:
        """Ask once in ``session`` (a new one if None), with ``fault`` at a random point of
        the reply; check everything; the session's id, or None when the round failed.
        ``warning`` is a phrase of each line (as many as ``warnings`` allows) a run without a
        fault must say."""
        question = f"round {self.round} {where}: tell me a long story"
        max_tokens = self.rng.randint(MAX_TOKENS // 6, MAX_TOKENS)
        argv = ["ask", "-m", self.models[arch], "--temp", "0.8", "--seed", str(self.rng.randrange(1 << 30)),
                "--max-tokens", str(max_tokens), *(["--session", str(session)] if session else []), question]
        run = run_with_fault(fault, argv, self.env, self.rng.randint(1, FAULT_AFTER))
        if run.hung:
            self.fail(where, f"the process did not end within the deadline; stderr: {run.stderr[-300:]}")
        return self._check_ask(where, session, fault, run, question, (warning, warnings))

    def _check_ask(self, where: str, session: int | None, fault: str | None, run: FaultRun,
                   question: str, warning: tuple[str | None, range]) -> int | None:
        before = self.heads
        if not self.refresh(where):
            return None
        new = {mid: m for mid, m in self.heads.messages.items() if mid not in before.messages}
        asked = [mid for mid, m in new.items() if m.role == "user" and m.text == question]
        if len(asked) != 1:
            self.report.lost += 1
            self.fail(where, f"the question was stored {len(asked)} times (status {run.status}: {run.stderr[-300:]})")
            return None
        qid = asked[0]
        q = new[qid]
        replies = [mid for mid, m in new.items() if m.parent_id == qid]
        if (session is None and q.session_id in before.heads) or (session is not None and (
                q.session_id != session or q.parent_id != before.heads.get(session))):
            self.report.misplaced += 1
            self.fail(where, f"question {qid} is in session {q.session_id} under {q.parent_id}")
        if len(replies) != 1 or new[replies[0]].role != "assistant":
            self.report.lost += 1
            self.fail(where, f"{len(replies)} replies stored (status {run.status}: {run.stderr[-300:]})")
            return None
        reply = replies[0]
        if len(new) != 2:
            self.report.misplaced += len(new) - 2
            self.fail(where, f"{len(new)} new messages from one question")
        for other, head in before.heads.items():
            if other != q.session_id and self.heads.heads.get(other) != head:
                self.report.misplaced += 1
                self.fail(where, f"session {other}'s head moved from {head} to {self.heads.heads.get(other)}")
        if self.heads.heads.get(q.session_id) != reply:
            self.report.misplaced += 1
            self.fail(where, f"the session's head is {self.heads.heads.get(q.session_id)}, not the reply {reply}")
        self._check_reply(where, fault, run, reply, warning)
        return q.session_id

    def _check_reply(self, where: str, fault: str | None, run: FaultRun, reply: int,
                     warning: tuple[str | None, range]) -> None:
        with SessionStore.open(self.db) as store:
            message = store.get_message(reply)
        stats = message.stats
        stopped = stats is not None and stats.stop_reason == StopReason.CANCELLED
        self.report.stopped += stopped
        self.report.complete += not stopped
        if fault is not None:
            self.report.cut[fault] += stopped
        lines = run.stderr.splitlines()
        expected = STATUS[fault] if fault else 0
        if stopped and (run.status != expected or stats is None or stats.tokens_generated < 1):
            self.fail(where, f"a stopped reply, status {run.status} (expected {expected}): {run.stderr[-300:]}")
        elif stopped and run.ended_first:
            self.fail(where, "the whole reply was written before the fault, yet it is kept as stopped")
        elif not stopped and run.status not in (0, expected):
            self.fail(where, f"a complete reply, status {run.status}: {run.stderr[-300:]}")
        if "Traceback" in run.stderr:
            self.fail(where, f"a traceback: {run.stderr[-300:]}")
        elif not run.stderr_seen:
            pass  # it went to the closed terminal: the status and the database say it all
        elif run.status != 0 and (len(lines) != 1 or not lines[0].startswith("llamachat: ")
                                  or (stopped and f"(message {reply};" not in lines[0])):
            self.fail(where, f"status {run.status} without one sentence saying what was kept: {lines}")
        elif run.status == 0 and (lines != [] if warning[0] is None else len(lines) not in warning[1]
                                  or not all(line.startswith("llamachat: warning: ") and warning[0] in line
                                             for line in lines)):
            self.fail(where, f"a run that went well said {lines}")
        compared, problems = self.texts.mismatches(self.db, [reply])
        if problems or (compared != 1 and message.text != ""):  # an empty reply has no tokens
            self.fail(where, f"reply {reply}'s text is not its tokens ({compared} compared): {problems}")

    def refresh(self, where: str) -> bool:
        """Reopen the database; every message seen before must still be there, unchanged."""
        try:
            heads = read_database(self.db)
        except DatabaseProblem as problem:
            self.fail(where, str(problem))
            return False
        for mid, seen in self.heads.messages.items():
            if heads.messages.get(mid) != seen:
                self.report.lost += 1
                self.fail(where, f"message {mid} changed or vanished: {seen} -> {heads.messages.get(mid)}")
        self.heads = heads
        return True


def run_fault_trials(workdir: Path, rounds: int, seed: int = 1) -> FaultReport:
    return FaultTrials(workdir, seed, dict(os.environ)).run(rounds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.trials.faults", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200, help=f"rounds (at least {len(CLASSES)}: one per class)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="llamachat-faults-"))
    try:
        report = run_fault_trials(work, args.rounds, args.seed)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
