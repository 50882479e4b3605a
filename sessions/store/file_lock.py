"""Who has the session database open: lock files beside it that every llamachat holds.

SQLite's locks protect transactions, not the file itself. Recovery replaces a damaged
database by its backup with a rename; a process that still had the old file open would
go on writing into the unlinked file, and every message it showed as saved would be lost.
So each process holds a shared ``flock`` on ``<db>.lock`` for as long as it has the
database open, and recovery, the only thing that ever replaces the file, needs that lock
exclusively: it waits a moment for the others to close the database and otherwise refuses.

A second file, ``<db>.lock-intent``, keeps recovery from waiting forever behind a stream
of short-lived openers (several ``ask`` commands in a loop): a process that wants the
exclusive lock takes the intent lock exclusively first, and openers pass through the
intent lock (shared, and only while they take the main lock), so nobody new comes in
while a recovery waits for those already inside.

``flock`` locks belong to one open file, not to a process: two stores opened in one
process count as two holders, as two processes would, and the kernel drops the locks of a
process that dies, so a killed llamachat never leaves the database locked.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from sessions.errors import LlamachatError

LOCK_SUFFIX = ".lock"
INTENT_SUFFIX = ".lock-intent"
POLL_SECONDS = 0.02


class LockTimeout(LlamachatError):
    """The lock could not be had within the time allowed."""


def _open_lock_file(path: Path) -> int | None:
    """A descriptor to lock ``path`` with, or None where it can neither be made nor opened
    (read-only media without a lock file: nobody can replace the database there anyway)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        try:
            return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
    return fd


def _flock(fd: int, operation: int, deadline: float) -> None:
    """``flock`` that gives up at ``deadline`` (``time.monotonic``) with ``LockTimeout``."""
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LockTimeout from None
            time.sleep(min(POLL_SECONDS, left))


class DatabaseLock:
    """The shared (open) or exclusive (being replaced) hold of one database file."""

    def __init__(self, db: Path) -> None:
        self.db = db
        main = _open_lock_file(db.with_name(db.name + LOCK_SUFFIX))
        intent = _open_lock_file(db.with_name(db.name + INTENT_SUFFIX)) if main is not None else None
        if main is not None and intent is None:
            os.close(main)
        self._fds: tuple[int, int] | None = (main, intent) if main is not None and intent is not None else None
        self.mode: str | None = None
        """``"shared"``, ``"exclusive"`` or None (not held)."""

    @property
    def available(self) -> bool:
        """False where no lock file could be made (a read-only folder)."""
        return self._fds is not None

    def acquire_shared(self, timeout: float) -> None:
        """Hold the database open; waits while a recovery is under way (``LockTimeout``)."""
        if self._fds is None:
            self.mode = "shared"
            return
        main, intent = self._fds
        deadline = time.monotonic() + timeout
        _flock(intent, fcntl.LOCK_SH, deadline)
        try:
            _flock(main, fcntl.LOCK_SH, deadline)
        finally:
            fcntl.flock(intent, fcntl.LOCK_UN)
        self.mode = "shared"

    def acquire_exclusive(self, timeout: float) -> bool:
        """Become the only holder, so the file may be replaced; False if others stay inside.

        The caller must not hold the lock already (release it first): a shared hold of its
        own would count as another holder.
        """
        if self._fds is None:
            return False
        main, intent = self._fds
        deadline = time.monotonic() + timeout
        try:
            _flock(intent, fcntl.LOCK_EX, deadline)
        except LockTimeout:
            return False
        try:
            _flock(main, fcntl.LOCK_EX, deadline)
        except LockTimeout:
            fcntl.flock(intent, fcntl.LOCK_UN)
            return False
        self.mode = "exclusive"
        return True

    def downgrade(self) -> None:
        """From exclusive to shared, without letting another recovery in between."""
        if self._fds is None or self.mode != "exclusive":
            return
        main, intent = self._fds
        fcntl.flock(main, fcntl.LOCK_SH)  # the intent lock still keeps others out
        fcntl.flock(intent, fcntl.LOCK_UN)
        self.mode = "shared"

    def release(self) -> None:
        if self._fds is not None and self.mode is not None:
            main, intent = self._fds
            fcntl.flock(main, fcntl.LOCK_UN)
            if self.mode == "exclusive":
                fcntl.flock(intent, fcntl.LOCK_UN)
        self.mode = None

    def close(self) -> None:
        self.release()
        if self._fds is not None:
            for fd in self._fds:
                os.close(fd)
        self._fds = None
