"""Concurrency trial: several processes write one session while the database is damaged
and restored from its backup under them.

    python -m tests.trials.concurrency [--workers N] [--rounds N] [--seed S] [--json]

(It then runs the same test with the real front ends: ``llamachat ask`` processes and the
app, ``tests.trials.concurrency_app``.)

Each worker (``concurrency_worker``) is a separate process that, round after round,
opens the database, adds a question under the head it saw and the answer under its
question, and closes it, as ``llamachat ask`` does. Halfway through the traffic this
process takes the database's lock exclusively (waiting, as a recovery does, for the
workers inside to close it), overwrites a page of old messages with random bytes and
lets go: the next worker to open it finds the damage and restores the backup while the
others wait at the lock, then carries over from the damaged file everything written
since the backup.

At the end every message a worker was told was saved is looked up: ``lost`` counts those
missing or changed, ``misplaced`` those under another parent than the one they were sent
under, and any question under a question; both must be 0. The report also counts the
recoveries, the stale heads retried (``conflicts``), the waits behind an unanswered
question (``queued``) and the opens refused while a recovery waited.
"""

from __future__ import annotations

import argparse
import json
import random
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sessions.store import SessionStore
from sessions.store.backup import backup_path
from sessions.store.file_lock import DatabaseLock

REPO = Path(__file__).resolve().parents[2]
PAGE = 4096
OLDEST = "oldest message of the trial"
WORKER_TIMEOUT = 600.0


@dataclass(kw_only=True)
class MessageTally:
    """What a concurrency trial counts, and what makes it pass: nothing lost or misplaced,
    no failure, and the damaged database restored at least once."""

    sent: int = 0
    """Messages a writer was told were saved."""
    stored: int = 0
    """Of those, found at the end."""
    lost: int = 0
    misplaced: int = 0
    recoveries: int = 0
    damaged_after: int = 0
    """Messages sent when the database was damaged."""
    events: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.failures and self.lost == 0 and self.misplaced == 0 and self.recoveries >= 1


@dataclass
class ConcurrencyReport(MessageTally):
    workers: int
    rounds: int

    def summary(self) -> str:
        e = self.events
        return (f"concurrency: {self.workers} processes x {self.rounds} rounds on one session, database "
                f"damaged after {self.damaged_after} messages and restored {self.recoveries} time(s) "
                f"({e['recovered']} opens showed the notice): "
                f"{self.sent} messages sent, {self.stored} stored, {self.lost} lost, {self.misplaced} misplaced; "
                f"{e['conflict']} stale heads retried, {e['queued']} waits for an answer, "
                f"{e['refused']} opens refused during recovery; {len(self.failures)} failures "
                f"({self.seconds:.1f} s)")


def prepare(db: Path) -> int:
    """A session with old messages, then the backup (written by the second open)."""
    with SessionStore.open(db) as store:
        session = store.create_session(title="shared session")
        head = None
        with store.transaction():
            for i in range(40):
                role = "user" if i % 2 == 0 else "assistant"
                text = (OLDEST if i == 0 else f"old message {i}") + " " + "filler " * 40
                head = store.append_message(session.id, head, role, text, expected_head=head).id
    SessionStore.open(db).close()
    assert backup_path(db).is_file()
    return session.id


def damage(db: Path, rng: random.Random) -> None:
    """Overwrite the page of the oldest message, holding the database exclusively."""
    lock = DatabaseLock(db)
    try:
        if not lock.acquire_exclusive(WORKER_TIMEOUT):
            raise RuntimeError("the workers never closed the database")
        data = bytearray(db.read_bytes())
        at = data.find(OLDEST.encode())
        if at < 0:
            raise RuntimeError("the oldest message is not in the database file")
        start = at // PAGE * PAGE
        data[start:start + PAGE] = rng.randbytes(PAGE)
        db.write_bytes(bytes(data))
    finally:
        lock.close()


def run_concurrency_trial(workdir: Path, *, workers: int = 4, rounds: int = 10, seed: int = 1) -> ConcurrencyReport:
    t0 = time.monotonic()
    db = workdir / "sessions.sqlite3"
    session_id = prepare(db)
    report = ConcurrencyReport(workers, rounds)
    sent: dict[int, dict] = {}
    children = [subprocess.Popen([sys.executable, "-m", "tests.trials.concurrency_worker", str(db),
                                  str(session_id), str(n), str(rounds)], cwd=REPO, stdout=subprocess.PIPE)
                for n in range(workers)]
    try:
        _follow(children, db, random.Random(seed), sent, report)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
            child.wait()
            child.stdout.close()
    _check(db, session_id, sent, report)
    report.seconds = time.monotonic() - t0
    return report


def _follow(children, db: Path, rng: random.Random, sent: dict[int, dict], report: ConcurrencyReport) -> None:
    """Read every worker's events until all are done; damage the database once, when half
    of the messages are sent."""
    selector = selectors.DefaultSelector()
    for child in children:
        selector.register(child.stdout, selectors.EVENT_READ, child)
    deadline = time.monotonic() + WORKER_TIMEOUT
    streams = len(children)
    while streams:
        if time.monotonic() > deadline:
            report.failures.append("the workers did not finish in time")
            return
        for key, _ in selector.select(timeout=5):
            line = key.fileobj.readline()
            if not line:
                selector.unregister(key.fileobj)
                streams -= 1
                if key.data.wait() != 0:
                    report.failures.append(f"a worker exited with status {key.data.returncode}")
                continue
            event = json.loads(line)
            report.events[event["event"]] += 1
            if event["event"] == "sent":
                sent[event["id"]] = event
            elif event["event"] in ("stuck", "error"):
                report.failures.append(line.decode().strip())
        if not report.damaged_after and len(sent) >= report.workers * report.rounds:
            damage(db, rng)
            report.damaged_after = len(sent)


def _check(db: Path, session_id: int, sent: dict[int, dict], report: ConcurrencyReport) -> None:
    # Restores are counted by the damaged files set aside: every open between a restore and
    # the first close of a process that showed its notice shows it too ("recovered" events).
    report.recoveries = len(list(db.parent.glob(db.name + ".corrupt-*")))
    with SessionStore.open(db) as store:
        tree = store.load_tree(session_id)
    report.sent = len(sent)
    for message_id, event in sent.items():
        if message_id not in tree or tree.get(message_id).text != event["text"]:
            report.lost += 1
            continue
        report.stored += 1
        message = tree.get(message_id)
        parent = tree.get(message.parent_id) if message.parent_id is not None else None
        if message.parent_id != event["parent"] or (
                message.role == "user" and parent is not None and parent.role == "user"):
            report.misplaced += 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.trials.concurrency", description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="llamachat-concurrency-"))
    try:
        report = run_concurrency_trial(work, workers=args.workers, rounds=args.rounds, seed=args.seed)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({**asdict(report), "events": dict(report.events)}) if args.json else report.summary())
    from tests.trials.concurrency_app import main as front_ends

    return front_ends(["--seed", str(args.seed), *(["--json"] if args.json else [])]) or (0 if report.ok else 1)


if __name__ == "__main__":
    sys.exit(main())
