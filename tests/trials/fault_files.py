"""What the fault trial does to files: clock jumps for the backup, damage, FIFOs.

The backup is judged by the state it records of itself, never by a clock or an mtime,
so these rounds make both lie: a backup written (through the store's own
``write_backup``) while the clock said a time still to come, or an open whose clock went
back after the backup was made, and the backup file's mtime set far into the future or
the past with ``os.utime``. The database is then damaged and recovered, and the rows it
could still read must all come back. FIFOs take the place of files that are read.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

from sessions.store import backup
from sessions.store.file_lock import DatabaseLock

from .fault_inject import DEADLINE, REPO

HOUR = 3600.0
YEAR = 365 * 24 * HOUR
PAGE = 4096
Row = tuple[int, int | None, str, str]
"""A message as the trial compares it: session, parent, role, text."""


@contextmanager
def clock_at(when: float | None) -> Iterator[None]:
    """``time.time`` says ``when`` in this process (the store reads the time through it)."""
    if when is None:
        yield
        return
    with mock.patch.object(time, "time", return_value=when):
        yield


def write_backup_at(db: Path, when: float) -> None:
    """The store's own backup of ``db``, made while the clock said ``when``."""
    conn = sqlite3.connect(db)
    try:
        with clock_at(when):
            backup.write_backup(conn, db)
    finally:
        conn.close()


def lie_about_mtime(path: Path, rng: random.Random) -> float:
    """Set ``path``'s mtime up to ten years ahead or back; the time set."""
    when = time.time() + rng.choice((-1, 1)) * rng.uniform(HOUR, 10 * YEAR)
    os.utime(path, (when, when))
    return when


def rows(path: Path) -> dict[int, Row]:
    """Every message of the database or backup at ``path``, read without changing it."""
    conn = sqlite3.connect(path.resolve().as_uri() + "?immutable=1", uri=True)
    try:
        return {row[0]: tuple(row[1:]) for row in conn.execute(  # type: ignore[misc]
            "SELECT id, session_id, parent_id, role, text FROM messages")}
    finally:
        conn.close()


def state(path: Path) -> str:
    conn = sqlite3.connect(path.resolve().as_uri() + "?immutable=1", uri=True)
    try:
        return backup.database_state(conn)
    finally:
        conn.close()


def damage_page_of(db: Path, text: str, rng: random.Random) -> None:
    """Overwrite a page that holds ``text`` with random bytes, holding the lock
    exclusively as a recovery does (no process may have the file open meanwhile)."""
    lock = DatabaseLock(db)
    try:
        if not lock.acquire_exclusive(DEADLINE):
            raise RuntimeError("the database was never closed by its last user")
        data = bytearray(db.read_bytes())
        found = [match.start() for match in re.finditer(re.escape(text.encode()), data)]
        if not found:
            raise RuntimeError(f"{text!r} is not in the database file")
        at = rng.choice(found)  # a message's row, or the title its session took from it
        start = at // PAGE * PAGE
        data[start:start + PAGE] = rng.randbytes(PAGE)
        db.write_bytes(bytes(data))
    finally:
        lock.close()


def readable_rows(db: Path, known: dict[int, Row], scratch: Path) -> tuple[dict[int, Row], set[int]]:
    """The messages of ``known`` and their sessions still readable in a damaged ``db``, one
    lookup each (a copy is read, so nothing here can touch the file the recovery will find)."""
    shutil.copyfile(db, scratch)
    found: dict[int, Row] = {}
    sessions: set[int] = set()
    try:
        conn = sqlite3.connect(scratch.resolve().as_uri() + "?immutable=1", uri=True)
    except sqlite3.Error:
        return found, sessions
    try:
        for mid in known:
            row = _lookup(conn, "SELECT session_id, parent_id, role, text FROM messages WHERE id = ?", mid)
            if row is not None:
                found[mid] = row  # type: ignore[assignment]
        for sid in {row[0] for row in known.values()}:
            if _lookup(conn, "SELECT id FROM sessions WHERE id = ?", sid) is not None:
                sessions.add(sid)
    finally:
        conn.close()
        scratch.unlink()
    return found, sessions


def _lookup(conn: sqlite3.Connection, sql: str, key: int) -> tuple | None:
    try:
        return conn.execute(sql, (key,)).fetchone()
    except sqlite3.DatabaseError:
        return None


def placeable(readable: dict[int, Row], sessions: set[int], held: dict[int, Row]) -> dict[int, Row]:
    """The readable messages newer than the backup that a recovery can put back: their
    session is readable or in the backup, and so is their parent (or it is put back too)."""
    known_sessions = sessions | {row[0] for row in held.values()}
    usable: dict[int, Row] = {}
    for mid in sorted(readable):
        row = readable[mid]
        if mid not in held and row[0] in known_sessions and (row[1] is None or row[1] in held or row[1] in usable):
            usable[mid] = row
    return usable


def run_briefly(argv: list[str], env: Mapping[str, str]) -> tuple[int | None, str, str]:
    """``python ARGV`` under the deadline: (status or None for a hang, stdout, stderr)."""
    try:
        done = subprocess.run([sys.executable, *argv], cwd=REPO, env=dict(env), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=DEADLINE)
    except subprocess.TimeoutExpired as expired:
        return None, str(expired.stdout or ""), str(expired.stderr or "")
    return done.returncode, done.stdout, done.stderr


def checkpoint_files(cache: Path) -> list[Path]:
    folder = cache / "checkpoints"
    return sorted(p for p in folder.rglob("*") if p.suffix in (".ckpt", ".snap") and p.is_file())


def theme_problems(env: Mapping[str, str]) -> tuple[int | None, list[str], str]:
    """Load the themes as the app does at start, in a process of its own."""
    status, out, err = run_briefly(
        ["-c", "from tui.theme_loader import load_themes\nfor p in load_themes()[1]: print(p)"], env)
    return status, out.splitlines(), err
