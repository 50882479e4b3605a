"""Opening the session database safely: checks, locks, read-only media and recovery.

Losing a chat is the worst thing this program could do, so opening is careful:

- The file is created private (0600, in a 0700 folder) before SQLite touches it. A file
  that is not an SQLite database, a damaged one, or one written by a newer llamachat is
  refused with a plain-words error and left exactly as it was, never "repaired" by
  starting afresh.
- Only real damage counts as damage (see ``sqlite_errors``). A database locked by another
  program is waited for, then reported busy; one on read-only media (or without write
  permission) is opened for reading, and writes are refused in a sentence; a full disk is
  reported as such. None of them is ever replaced by the backup.
- A damaged file is replaced by its verified backup (``backup.recover``) only while this
  process holds the database's lock exclusively (``file_lock``): never under another
  process that has it open. ``Database.recovery_notice`` then says what happened.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from sessions.errors import LlamachatError
from sessions.paths import ensure_private_dir
from sessions.store import backup
from sessions.store.database import Database, open_in_this_process
from sessions.store.errors import DatabaseBusy, DatabaseDamaged, DatabaseFull, DatabaseInUse, StoreError
from sessions.store.file_lock import DatabaseLock, LockTimeout
from sessions.store.schema import SCHEMA_VERSION, apply_migrations, current_version
from sessions.store.sqlite_errors import Cause, cause_of

SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT = 30.0
"""Seconds a statement waits for another program's lock before reporting "busy"."""
RECOVERY_WAIT = 3.0
"""Seconds recovery waits for other llamachat processes to close a damaged database."""


class _ReadOnly(LlamachatError):
    def __init__(self, reason: str) -> None:
        self.reason = reason


def open_database(path: Path, *, busy_timeout: float = BUSY_TIMEOUT) -> Database:
    """Open (creating if needed) and migrate the database at ``path``.

    A damaged file is replaced by its backup when that one checks out and no other
    llamachat has the database open (the database's ``recovery_notice`` then says so);
    otherwise it is refused and left untouched.
    """
    ensure_private_dir(path.parent)
    lock = DatabaseLock(path)
    try:
        lock.acquire_shared(busy_timeout)
    except LockTimeout:
        lock.close()
        raise DatabaseBusy(path, "another llamachat is restoring it from its backup") from None
    try:
        try:
            if backup.swap_pending(path):  # a recovery killed between its notice and its swap
                raise _refuse(path, "its restore from the backup was interrupted", damaged=True)
            database = _open(path, lock, busy_timeout)
        except DatabaseDamaged as damage:
            database = _recover(path, lock, damage, busy_timeout)
    except BaseException:
        lock.close()
        raise
    _attach_notice(database)
    return database


def _recover(path: Path, lock: DatabaseLock, damage: DatabaseDamaged, busy_timeout: float) -> Database:
    """Replace the damaged file by its backup, holding the database exclusively."""
    pending = backup.swap_pending(path)
    if not pending and not backup.backup_path(path).is_file():
        raise damage  # nothing to restore: refused, untouched, whoever has it open
    lock.release()
    if not lock.acquire_exclusive(RECOVERY_WAIT):
        if not lock.available:  # read-only media: nothing could be replaced anyway
            raise damage
        raise DatabaseInUse(path, damage.reason) from damage
    try:
        if backup.swap_pending(path):
            backup.finish_swap(path)  # its salvage and notice are done: only the rename was missing
            return _open(path, lock, busy_timeout)
        try:
            return _open(path, lock, busy_timeout)  # restored by another process meanwhile?
        except DatabaseDamaged as still:
            notice = backup.recover(path, still)  # raises when there is no usable backup
        database = _open(path, lock, busy_timeout)
        database.recovery_notice = notice
        return database
    finally:
        lock.downgrade()


def _attach_notice(database: Database) -> None:
    """Show a recovery's notice at every open until a database that showed it closes.

    It lives in a file because the process that recovered may be killed before the user
    saw it; a healthy database with nothing said would then hide what was lost.
    """
    notice = backup.pending_notice(database.path)
    if notice is None:
        return
    database.recovery_notice = notice
    if database.read_only is None:
        database.notice_file = backup.notice_path(database.path)


def _refuse(path: Path, why: str, *, damaged: bool = False) -> StoreError:
    message = (
        f"cannot open the session database {path}: {why}. The file was left untouched; "
        "move it aside (or restore a backup) to start with an empty database."
    )
    return DatabaseDamaged(message, why) if damaged else StoreError(message)


def _check_file(path: Path) -> bool:
    """Refuse anything but a missing file, an empty file or an SQLite file; True if new."""
    _check_companions(path)
    if not path.exists():
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return _check_file(path)
        except OSError as error:
            raise StoreError(f"cannot create the session database {path}: "
                             f"{error.strerror or error}") from error
        os.close(fd)
        os.chmod(path, 0o600)
        return True
    if not path.is_file():
        raise _refuse(path, "it is not a regular file")
    if open_in_this_process(path):
        return False  # checked when it was opened; reading it again would drop SQLite's locks
    try:
        with open(path, "rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as error:
        raise StoreError(f"cannot read the session database {path}: {error.strerror or error}") from error
    if header and header != SQLITE_HEADER:
        raise _refuse(path, "it is not an SQLite database", damaged=True)
    if not header and backup.backup_path(path).is_file() and not _has_wal(path):
        raise _refuse(path, "it is empty", damaged=True)  # truncated to nothing
    return False


def _check_companions(path: Path) -> None:
    """SQLite reads the ``-wal`` and ``-shm`` beside the database: a FIFO or a device there
    would block it or fail as a raw "disk I/O error"; refused in one sentence instead."""
    for side in ("-wal", "-shm"):
        companion = path.with_name(path.name + side)
        try:
            mode = os.stat(companion).st_mode
        except OSError:
            continue  # missing (the usual case), or unreadable: SQLite says so
        if not stat.S_ISREG(mode):
            raise StoreError(f"cannot open the session database {path}: {companion} beside it is not a "
                             "regular file (a pipe or a device); remove it, then try again")


def _has_wal(path: Path) -> bool:
    """A new database in WAL mode may keep everything in its -wal until a checkpoint."""
    wal = path.with_name(path.name + "-wal")
    return wal.is_file() and wal.stat().st_size > 0


def _make_private(path: Path) -> None:
    for name in (path.name, path.name + "-wal", path.name + "-shm"):
        try:
            os.chmod(path.with_name(name), 0o600)
        except OSError:
            pass


def _writable(path: Path) -> str | None:
    """Why the database cannot be written here (None when it can, as far as one can tell)."""
    for target in (path, path.parent):  # WAL needs to create its -wal and -shm files
        if target.exists() and not os.access(target, os.W_OK):
            try:
                read_only_fs = bool(os.statvfs(target).f_flag & os.ST_RDONLY)
            except (OSError, AttributeError):
                read_only_fs = False
            return "the file system is read-only" if read_only_fs else f"no permission to write {target}"
    return None


def _open(path: Path, lock: DatabaseLock, busy_timeout: float) -> Database:
    reason = _writable(path)
    if reason is not None and path.exists():
        return _open_read_only(path, lock, reason, busy_timeout)
    created = _check_file(path)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=busy_timeout)
    conn.row_factory = sqlite3.Row
    try:
        _check_contents(conn, path, busy_timeout)
        _prepare(conn, path, created, busy_timeout)
    except _ReadOnly as read_only:
        conn.close()
        return _open_read_only(path, lock, read_only.reason, busy_timeout)
    except BaseException:
        conn.close()
        raise
    _make_private(path)
    return Database(conn, path, lock=lock)


def _classified(path: Path, error: sqlite3.Error, doing: str, waited: float) -> BaseException:
    """The error to raise for ``error`` met while ``doing`` (damage only when it is damage)."""
    cause = cause_of(error, path.parent)
    if cause is Cause.DAMAGED:
        return _refuse(path, f"it is damaged or not a database ({error})", damaged=True)
    if cause is Cause.BUSY:
        return DatabaseBusy(path, f"{error} after waiting {waited:g} s")
    if cause is Cause.READ_ONLY:
        return _ReadOnly(str(error))
    if cause is Cause.FULL:
        return DatabaseFull(path, str(error))
    return _refuse(path, f"it could not be {doing} ({error})")


def _check_contents(conn: sqlite3.Connection, path: Path, waited: float) -> None:
    try:
        version = current_version(conn)
        problems = [row[0] for row in conn.execute("PRAGMA quick_check(5)")]
    except sqlite3.Error as error:
        raise _classified(path, error, "read", waited) from error
    if problems != ["ok"]:
        raise _refuse(path, "it is damaged (" + "; ".join(problems) + ")", damaged=True)
    if version > SCHEMA_VERSION:
        raise _refuse(
            path,
            f"it was written by a newer version of llamachat (schema {version}; "
            f"this version knows up to {SCHEMA_VERSION}). Upgrade llamachat to open it",
        )


def _prepare(conn: sqlite3.Connection, path: Path, created: bool, busy_timeout: float) -> None:
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise _refuse(path, f"it cannot use write-ahead logging (journal mode {mode})")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        apply_migrations(conn)
    except sqlite3.Error as error:
        raise _classified(path, error, "prepared", busy_timeout) from error
    if not created:
        backup.backup_if_due(conn, path)  # a copy of a file that just passed its check


def _open_read_only(path: Path, lock: DatabaseLock, reason: str, busy_timeout: float) -> Database:
    """Open for reading only: through the WAL when SQLite can, else as an unchanging file."""
    last: sqlite3.Error | None = None
    for mode in ("mode=ro", "immutable=1"):
        conn = sqlite3.connect(path.resolve().as_uri() + "?" + mode, uri=True, isolation_level=None,
                               check_same_thread=False, timeout=busy_timeout)
        conn.row_factory = sqlite3.Row
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error as error:  # no -shm beside a WAL file, and none can be made
            conn.close()
            if cause_of(error) is Cause.DAMAGED:
                raise _classified(path, error, "read", busy_timeout) from error
            last = error
            continue
        try:
            _check_contents(conn, path, busy_timeout)
        except _ReadOnly as error:
            conn.close()
            last = sqlite3.OperationalError(error.reason)
            continue
        except BaseException:
            conn.close()
            raise
        return Database(conn, path, lock=lock, read_only=reason)
    raise _refuse(path, f"it cannot be opened even for reading ({last})")
