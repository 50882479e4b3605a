"""An open session database: one connection, its lock file, and the one way changes commit.

Opening (with its checks and its recovery) lives in ``opening``; this is what the store
works with afterwards. Three promises hold here:

- A change reported as done is committed (WAL, ``synchronous=FULL``), and one that
  failed says why in words: busy (another program held the file longer than we wait),
  a full disk, read-only media, damage. None of them is ever mistaken for another.
- Reads that must agree with each other (a session's tree and its head) run in one read
  transaction (``snapshot``), so a commit from another process cannot land between them.
- Nothing is written into a file that is no longer the database: before each write (and
  each read) the file at the path is compared with the one that was opened (device and
  inode), and a replaced or moved file stops all writing with ``DatabaseReplaced``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sessions.crashpoints import crashpoint
from sessions.store.errors import DatabaseBusy, DatabaseFull, DatabaseReadOnly, DatabaseReplaced, StoreError
from sessions.store.file_lock import DatabaseLock
from sessions.store.sqlite_errors import Cause, cause_of


def file_identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


_open_here: Counter[tuple[int, int]] = Counter()
"""The database files this process has open, by identity (see ``open_in_this_process``)."""


def open_in_this_process(path: Path) -> bool:
    """Whether a ``Database`` of this process has the file at ``path`` open.

    SQLite's locks are POSIX locks, which belong to the process: closing *any* descriptor
    of the file in this process drops them all. Opening the file again from Python (to
    read its header) and closing it would drop the locks of the connection already open,
    and another process closing its own connection would then believe it was the last
    one and delete the WAL under it. So a file open here is not opened again that way.
    """
    identity = file_identity(path)
    return identity is not None and _open_here[identity] > 0


class Database:
    """A connection plus a lock and nestable transactions.

    One connection is shared by the threads of the app (the UI thread and workers), so
    every use holds the lock. ``transaction()`` nests: the outermost level is a real
    ``BEGIN IMMEDIATE ... COMMIT``, inner levels are savepoints, so an importer can wrap
    many store calls in one all-or-nothing unit.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path, *, lock: DatabaseLock | None = None,
                 read_only: str | None = None) -> None:
        self.conn = conn
        self.path = path
        self.file_lock = lock
        self.read_only = read_only
        """Why the database was opened for reading only (None: it is writable)."""
        self._identity = file_identity(path)
        self._counted = self._identity is not None
        if self._identity is not None:
            _open_here[self._identity] += 1
        self._replaced = False
        self._lock = threading.RLock()
        self._depth = 0
        self.recovery_notice: str | None = None
        """Set when opening replaced a damaged file by its backup: what happened, in words."""
        self.notice_file: Path | None = None
        """Where ``recovery_notice`` is kept on disk; removed by a clean ``close``."""

    # -- errors ----------------------------------------------------------------------

    def failure(self, error: BaseException, *, saving: bool) -> StoreError:
        """The store error that tells the user what ``error`` means for them."""
        cause = cause_of(error, self.path.parent)
        if cause is Cause.BUSY:
            return DatabaseBusy(self.path, str(error), saving=saving)
        if cause is Cause.FULL:
            return DatabaseFull(self.path, str(error))
        if cause is Cause.READ_ONLY:
            return DatabaseReadOnly(self.path, str(error))
        if cause is Cause.DAMAGED:
            return StoreError(f"the session database {self.path} is damaged ({error}); close llamachat and "
                              "start it again to restore it from its backup")
        if saving:
            return StoreError(f"the session database could not save the change: {error}")
        return StoreError(f"the session database could not be read: {error}")

    def check_not_replaced(self) -> None:
        """Raise ``DatabaseReplaced`` if the path no longer names the file that was opened."""
        if not self._replaced and file_identity(self.path) != self._identity:
            self._replaced = True
        if self._replaced:
            raise DatabaseReplaced(self.path)

    # -- reading ---------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """Reads, from the file that was opened: a replaced file is never read either (its
        WAL now belongs to another file, and SQLite would mix the two)."""
        with self._lock:
            try:
                if not self.conn.in_transaction:
                    self.check_not_replaced()
                yield self.conn
            except sqlite3.Error as error:
                raise self.failure(error, saving=False) from error

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """Reads that see one state of the database, whatever other processes commit."""
        with self.read() as conn:
            if conn.in_transaction:  # inside a transaction or another snapshot already
                yield conn
                return
            conn.execute("BEGIN DEFERRED")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    # -- writing ---------------------------------------------------------------------

    @contextmanager
    def transaction(self, *, crash_label: str | None = None) -> Iterator[sqlite3.Connection]:
        """``crash_label`` names the crash points around the commit (see ``crashpoints``)."""
        with self._lock:
            if self._depth:
                yield from self._savepoint()
                return
            self._begin()
            self._depth = 1
            try:
                yield self.conn
            except sqlite3.Error as error:
                self._depth = 0
                self._rollback()
                raise self.failure(error, saving=True) from error
            except BaseException:
                self._depth = 0
                self._rollback()
                raise
            self._depth = 0
            if crash_label:
                crashpoint(f"{crash_label}.before_commit")
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error as error:
                self._rollback()
                raise self.failure(error, saving=True) from error
            if crash_label:
                crashpoint(f"{crash_label}.after_commit")

    def _begin(self) -> None:
        if self.read_only is not None:
            raise DatabaseReadOnly(self.path, self.read_only)
        self.check_not_replaced()
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise self.failure(error, saving=True) from error
        try:
            self.check_not_replaced()  # replaced while this process waited for the write lock
        except DatabaseReplaced:
            self._rollback()
            raise

    def _savepoint(self) -> Iterator[sqlite3.Connection]:
        name = f"level{self._depth}"
        self.conn.execute(f"SAVEPOINT {name}")
        self._depth += 1
        try:
            yield self.conn
        except BaseException:
            self._undo_savepoint(name)
            raise  # the original error (a full disk), never one from the undo
        finally:
            self._depth -= 1
        self.conn.execute(f"RELEASE {name}")

    def _undo_savepoint(self, name: str) -> None:
        """Undo a savepoint's changes, if SQLite has not already undone the transaction.

        After some errors (SQLITE_FULL, SQLITE_IOERR) SQLite rolls back the whole
        transaction, savepoints included: ``ROLLBACK TO`` would then fail with "no such
        savepoint" and hide why the change was lost.
        """
        if not self.conn.in_transaction:
            return
        try:
            self.conn.execute(f"ROLLBACK TO {name}")
            self.conn.execute(f"RELEASE {name}")
        except sqlite3.Error:
            pass  # the outer level rolls back the whole transaction anyway

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # SQLite rolls back by itself after some errors (a full disk)

    def close(self) -> None:
        with self._lock:
            if self._counted and self._identity is not None:
                _open_here[self._identity] -= 1
                self._counted = False
            self.conn.close()
            if self.notice_file is not None:  # shown for as long as this database was open
                try:
                    self.notice_file.unlink(missing_ok=True)
                except OSError:
                    pass  # shown again at the next start: better twice than never
                self.notice_file = None
            if self.file_lock is not None:
                self.file_lock.close()
                self.file_lock = None
