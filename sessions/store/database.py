"""Opening the session database safely, and the one way changes are committed.

Losing a chat is the worst thing this program could do, so opening is careful: the file
is created private (0600, in a 0700 folder) before SQLite touches it; a file that is not
an SQLite database, a damaged one, or one written by a newer llamachat is refused with a
plain-words error and left exactly as it was, never "repaired" by starting afresh. Once
open, the database runs in WAL mode with ``synchronous=FULL``: a change that a method
reported as done survives a crash or power cut. What a crash cannot do, a disk can: a
damaged file is replaced by its verified backup when there is one (``backup``), the
damaged file kept aside, and ``Database.recovery_notice`` says what happened.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sessions.crashpoints import crashpoint
from sessions.paths import ensure_private_dir
from sessions.store import backup
from sessions.store.backup import DatabaseDamaged
from sessions.store.errors import StoreError
from sessions.store.schema import SCHEMA_VERSION, apply_migrations, current_version

SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 30_000


class Database:
    """A connection plus a lock and nestable transactions.

    One connection is shared by the threads of the app (the UI thread and workers), so
    every use holds the lock. ``transaction()`` nests: the outermost level is a real
    ``BEGIN IMMEDIATE ... COMMIT``, inner levels are savepoints, so an importer can wrap
    many store calls in one all-or-nothing unit.
    """

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self.conn = conn
        self.path = path
        self._lock = threading.RLock()
        self._depth = 0
        self.recovery_notice: str | None = None
        """Set when opening replaced a damaged file by its backup: what happened, in words."""

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self.conn
            except sqlite3.Error as error:
                raise StoreError(f"the session database could not be read: {error}") from error

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
                raise StoreError(f"the session database could not save the change: {error}") from error
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
                raise StoreError(f"the session database could not save the change: {error}") from error
            if crash_label:
                crashpoint(f"{crash_label}.after_commit")

    def _begin(self) -> None:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise StoreError(f"the session database is not writable: {error}") from error

    def _savepoint(self) -> Iterator[sqlite3.Connection]:
        name = f"level{self._depth}"
        self.conn.execute(f"SAVEPOINT {name}")
        self._depth += 1
        try:
            yield self.conn
        except BaseException:
            self.conn.execute(f"ROLLBACK TO {name}")
            self.conn.execute(f"RELEASE {name}")
            raise
        finally:
            self._depth -= 1
        self.conn.execute(f"RELEASE {name}")

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def close(self) -> None:
        with self._lock:
            self.conn.close()


def _refuse(path: Path, why: str, *, damaged: bool = False) -> StoreError:
    message = (
        f"cannot open the session database {path}: {why}. The file was left untouched; "
        "move it aside (or restore a backup) to start with an empty database."
    )
    return DatabaseDamaged(message, why) if damaged else StoreError(message)


def _check_file(path: Path) -> bool:
    """Refuse anything but a missing file, an empty file or an SQLite file; True if new."""
    if not path.exists():
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return _check_file(path)
        os.close(fd)
        os.chmod(path, 0o600)
        return True
    if not path.is_file():
        raise _refuse(path, "it is not a regular file")
    with open(path, "rb") as handle:
        header = handle.read(len(SQLITE_HEADER))
    if header and header != SQLITE_HEADER:
        raise _refuse(path, "it is not an SQLite database", damaged=True)
    if not header and backup.backup_path(path).is_file() and not _has_wal(path):
        raise _refuse(path, "it is empty", damaged=True)  # truncated to nothing
    return False


def _has_wal(path: Path) -> bool:
    """A new database in WAL mode may keep everything in its -wal until a checkpoint."""
    wal = path.with_name(path.name + "-wal")
    return wal.is_file() and wal.stat().st_size > 0


def _make_private(path: Path) -> None:
    for name in (path.name, path.name + "-wal", path.name + "-shm"):
        try:
            os.chmod(path.with_name(name), 0o600)
        except FileNotFoundError:
            pass


def open_database(path: Path) -> Database:
    """Open (creating if needed) and migrate the database at ``path``.

    A damaged file is replaced by its backup when that one checks out (the database's
    ``recovery_notice`` then says so); otherwise it is refused and left untouched.
    """
    try:
        return _open(path)
    except DatabaseDamaged as damage:
        notice = backup.recover(path, damage)  # raises when there is no usable backup
    database = _open(path)
    database.recovery_notice = notice
    return database


def _open(path: Path) -> Database:
    ensure_private_dir(path.parent)
    created = _check_file(path)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
    conn.row_factory = sqlite3.Row
    try:
        try:
            version = current_version(conn)
            problems = [row[0] for row in conn.execute("PRAGMA quick_check(5)")]
        except sqlite3.DatabaseError as error:
            raise _refuse(path, f"it is damaged or not a database ({error})", damaged=True) from error
        if problems != ["ok"]:
            raise _refuse(path, "it is damaged (" + "; ".join(problems) + ")", damaged=True)
        if version > SCHEMA_VERSION:
            raise _refuse(
                path,
                f"it was written by a newer version of llamachat (schema {version}; "
                f"this version knows up to {SCHEMA_VERSION}). Upgrade llamachat to open it",
            )
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise _refuse(path, f"it cannot use write-ahead logging (journal mode {mode})")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        apply_migrations(conn)
        if not created:
            backup.backup_if_due(conn, path)  # a copy of a file that just passed its check
    except StoreError:
        conn.close()
        raise
    except sqlite3.Error as error:
        conn.close()
        raise _refuse(path, f"it could not be prepared ({error})") from error
    _make_private(path)
    return Database(conn, path)
