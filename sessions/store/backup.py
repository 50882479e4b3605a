"""One verified copy of the session database, and the recovery that puts it back.

WAL with ``synchronous=FULL`` makes the database survive crashes and power cuts, but not
a disk that flips bits, a sync tool that truncates the file, or another program saving
over it. Refusing such a file keeps it safe but leaves the user with no chats at all, so
the store keeps ``sessions.sqlite3.bak`` beside it:

- It is written right after an open whose integrity check passed (never of a database
  that was just created): the copy is always of a file known to be good. SQLite's
  online backup writes a temp file (0600) in the same folder, switched to a rollback
  journal so it is one self-contained file, fsynced and renamed over the old backup.
- It is judged by what it says of itself, not by the file's mtime: a table inside it
  (``BACKUP_TABLE``) records when it was made and the state of the database it copied
  (row counts and highest ids, ``database_state``). It is written again when that state
  is not the database's any more and it was made ``BACKUP_EVERY_SECONDS`` ago, or at a
  time still to come: a clock set back, or a backup stamped in 2030, cannot freeze it.
  A backup without the table (or unreadable) is written again. Restored, the table is
  dropped: it describes the backup, not the database that takes its place.
- When opening finds the database damaged and the backup checks out, the damaged file
  (with its ``-wal``) is copied to ``sessions.sqlite3.corrupt-<time>`` (never deleted),
  ``salvage`` copies into a copy of the backup what it can still read of newer sessions
  and messages and repeats the deletions made since, and only then does that copy take
  the database's place, so the user never gets the backup without its salvage. The
  plain-words notice of what came back and of what could not be recovered is written to
  ``sessions.sqlite3.recovery-notice`` *before* the swap: a process killed at any point
  either left the damaged file in place (the next start recovers again) or left the
  notice on disk (the next start finishes the swap if need be and says what happened).
  The notice file goes when a database that showed it is closed. Without a usable
  backup the file is refused, as before.

Recovery replaces the database file, so its caller must hold the database's lock
exclusively (``file_lock``): no other process may have the file open meanwhile.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import sqlite3
import time
from pathlib import Path

from sessions.bounded_read import read_regular_file
from sessions.durable import fsync_file, fsync_folder, replacing, write_atomically
from sessions.store import replay
from sessions.store.errors import DatabaseDamaged, StoreError
from sessions.store.salvage import Salvage, salvage_newer
from sessions.store.schema import SCHEMA_VERSION

log = logging.getLogger(__name__)

BACKUP_SUFFIX = ".bak"
RESTORED_SUFFIX = ".restored"
NOTICE_SUFFIX = ".recovery-notice"
BACKUP_EVERY_SECONDS = 15 * 60.0
BACKUP_TABLE = "llamachat_backup"
"""The one-row table inside a backup: when it was made, and of which database state."""
STALE_TEMP_SECONDS = 3600.0
_TEMP = re.compile(r"\..+\.(\d+)\.[0-9a-f]{8}\.tmp")


def backup_path(db: Path) -> Path:
    return db.with_name(db.name + BACKUP_SUFFIX)


def backup_if_due(conn: sqlite3.Connection, db: Path, every: float = BACKUP_EVERY_SECONDS) -> bool:
    """Write the backup if it is missing, does not say what it holds, or holds an older
    state of the database made ``every`` seconds ago or at a time still to come; never raises.

    A failed backup must not stop the user from chatting: it is logged and retried at the
    next open.
    """
    try:
        made = backup_made(backup_path(db))
        due = made is None or _stale(made, database_state(conn), every)
    except (OSError, sqlite3.Error) as error:
        log.warning("could not read the state of the session database %s: %s", db, error)
        return False
    if not due:
        return False
    try:
        write_backup(conn, db)
    except (OSError, sqlite3.Error) as error:
        log.warning("could not back up the session database %s: %s", db, error)
        return False
    return True


def _stale(made: tuple[float, str], state: str, every: float) -> bool:
    made_at, made_of = made
    if made_of == state:
        return False  # nothing happened since: a new copy would hold the same
    age = time.time() - made_at
    return age >= every or age < 0  # a negative age: the clock went back, or the stamp is wrong


def database_state(conn: sqlite3.Connection) -> str:
    """What the database holds, in a few numbers that any change of the user's moves.

    Counts and highest ids only: no clock enters it, so it is read the same whatever
    the time says.
    """
    parts = []
    for table in ("sessions", "messages", "message_tokens", "remembered_children", "deletions"):
        if conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone():
            parts.append(str(tuple(conn.execute(f"SELECT count(*), max(rowid) FROM {table}").fetchone())))
    if parts:
        heads = conn.execute("SELECT total(active_leaf_id), total(length(title)) FROM sessions").fetchone()
        parts.append(str(tuple(heads)))
    return " ".join(parts)


def backup_made(path: Path) -> tuple[float, str] | None:
    """(when, of which database state) the backup at ``path`` was made; None when there is
    no backup or it does not say."""
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?immutable=1", uri=True)
    except sqlite3.Error:
        return None
    try:
        row = conn.execute(f"SELECT made_at, state FROM {BACKUP_TABLE}").fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    if row is None or not isinstance(row[0], (int, float)) or not isinstance(row[1], str):
        return None
    return float(row[0]), row[1]


def write_backup(conn: sqlite3.Connection, db: Path) -> Path:
    """Copy the open database ``conn`` to its backup file, atomically, with the time and
    the state of what it copied (read from the copy itself, so they match)."""
    final = backup_path(db)
    _sweep_temps(db)
    with replacing(final) as temp:
        dest = sqlite3.connect(temp, isolation_level=None)
        try:
            conn.backup(dest)
            dest.execute("PRAGMA journal_mode = DELETE")  # one file, no -wal beside it
            state = database_state(dest)
            dest.execute(f"CREATE TABLE {BACKUP_TABLE} (made_at REAL NOT NULL, state TEXT NOT NULL)")
            dest.execute(f"INSERT INTO {BACKUP_TABLE} VALUES (?, ?)", (time.time(), state))
        finally:
            dest.close()
    return final


def _forget_made(path: Path) -> None:
    """Drop the backup's own table from a copy about to become the database."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(f"DROP TABLE IF EXISTS {BACKUP_TABLE}")
    finally:
        conn.close()


def backup_problem(path: Path) -> str | None:
    """Why the backup at ``path`` cannot be used, or None when it checks out."""
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?immutable=1", uri=True)
    except sqlite3.Error as error:
        return str(error)
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        problems = [row[0] for row in conn.execute("PRAGMA quick_check(5)")]
    except sqlite3.DatabaseError as error:
        return f"it is damaged or not a database ({error})"
    finally:
        conn.close()
    if problems != ["ok"]:
        return "it is damaged (" + "; ".join(problems) + ")"
    if version > SCHEMA_VERSION:
        return f"it was written by a newer llamachat (schema {version})"
    return None


def recover(db: Path, damage: DatabaseDamaged) -> str:
    """Replace the damaged ``db`` by its backup plus salvage; returns the notice for the user.

    The caller holds the database's lock exclusively. Raises ``damage`` itself when there
    is no backup, and a ``StoreError`` naming both files when the backup is unusable too;
    in both cases nothing is moved. Until the notice is on disk the file at ``db`` is not
    touched, so an interruption before then only leaves copies behind.
    """
    backup = backup_path(db)
    if not backup.is_file():
        raise damage
    problem = backup_problem(backup)
    if problem is not None:
        raise StoreError(f"{damage} The backup {backup} cannot be used either: {problem}.")
    made = backup_made(backup)
    taken = made[0] if made is not None else backup.stat().st_mtime
    aside = _aside_name(db)
    _keep_aside(db, aside)
    temp = _temp_name(db)
    try:
        shutil.copyfile(backup, temp)
        os.chmod(temp, 0o600)
        _forget_made(temp)
        salvage = salvage_newer(aside, temp)
        notice = recovery_notice(damage.reason, taken, aside, salvage, _contents(temp))
        fsync_file(temp)
        os.replace(temp, restored_path(db))
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_folder(db.parent)
    write_atomically(notice_path(db), notice)  # from here on the recovery is as good as done
    finish_swap(db)
    return notice


def restored_path(db: Path) -> Path:
    """The backup with its salvage, waiting to take the database's place."""
    return db.with_name(db.name + RESTORED_SUFFIX)


def notice_path(db: Path) -> Path:
    """The notice of the last recovery, kept until a database that showed it is closed."""
    return db.with_name(db.name + NOTICE_SUFFIX)


def swap_pending(db: Path) -> bool:
    """Whether a recovery was interrupted after its notice was written but before the swap."""
    return notice_path(db).is_file() and restored_path(db).is_file()


def finish_swap(db: Path) -> None:
    """Put the restored file in the database's place (the caller holds it exclusively).

    The damaged file's ``-wal`` goes first: SQLite would replay it onto any file at that
    name. A kill between the two steps leaves the restored file and the notice, and the
    next start calls this again.
    """
    for side in ("-wal", "-shm"):
        db.with_name(db.name + side).unlink(missing_ok=True)
    os.replace(restored_path(db), db)
    fsync_folder(db.parent)


NOTICE_LIMIT = 1 << 20
"""Bytes of a recovery notice read: a few sentences (a FIFO or a device there is not read)."""


def pending_notice(db: Path) -> str | None:
    """The notice of a recovery not yet shown (None when there is none, or it is unreadable:
    too large, not UTF-8, or not a regular file, which would block the read for ever)."""
    try:
        return read_regular_file(notice_path(db), NOTICE_LIMIT).decode("utf-8") or None
    except (OSError, UnicodeDecodeError):
        return None


def _contents(db: Path) -> tuple[int, int] | None:
    """(sessions, messages) in the restored database, None if it cannot be counted."""
    try:
        conn = sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            return (conn.execute("SELECT count(*) FROM sessions").fetchone()[0],
                    conn.execute("SELECT count(*) FROM messages").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.Error:
        return None


def recovery_notice(reason: str, taken: float, aside: Path, salvage: Salvage,
                    contents: tuple[int, int] | None = None) -> str:
    """What recovery did, what came back and what is missing, in words a user can act on."""
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(taken))
    reason = " ".join(reason.split())  # SQLite's integrity report spans several lines
    parts = [f"the session database could not be used ({reason}), so it was replaced by its "
             f"backup of {when}; the damaged file is kept as {aside}."]
    if contents is not None:
        parts.append(f"It now holds {contents[0]} session(s) and {contents[1]} message(s).")
    recovered = salvage.messages_recovered
    if salvage.error is not None and salvage.messages_found is None:
        parts.append(f"Changes made after {when} could not be read from the damaged file "
                     f"({salvage.error}) and are not in the restored database: new messages are "
                     "missing, and what you deleted since may be back.")
        return " ".join(parts)
    else:
        if recovered or salvage.sessions_recovered:
            parts.append(f"{recovered} message(s) and {salvage.sessions_recovered} session(s) "
                         "written after the backup were recovered from the damaged file.")
        if salvage.messages_lost:
            parts.append(f"{salvage.messages_lost} message(s) written after the backup could "
                         "not be recovered.")
        elif not recovered and not salvage.sessions_recovered and not (
                salvage.undone.messages or salvage.undone.session_ids):
            parts.append("Nothing newer than the backup was found in the damaged file.")
        if salvage.error is not None:
            parts.append(f"Part of the damaged file could not be read ({salvage.error}).")
        if salvage.skipped:
            parts.append(f"{salvage.skipped} damaged row(s) could not be used and were left out.")
    parts.extend(replay.describe(salvage.deletions, salvage.heads, when, salvage.undone))
    return " ".join(parts)


def _keep_aside(db: Path, aside: Path) -> None:
    """Copy the damaged file (and its -wal) to the ``aside`` name, leaving ``db`` as it was."""
    if db.exists():
        try:
            os.link(db, aside)
        except OSError:
            shutil.copy2(db, aside)
    wal = db.with_name(db.name + "-wal")
    if wal.exists():
        shutil.copy2(wal, aside.with_name(aside.name + "-wal"))
    fsync_folder(db.parent)


def _aside_name(db: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = db.with_name(f"{db.name}.corrupt-{stamp}")
    n = 1
    while candidate.exists():
        n += 1
        candidate = db.with_name(f"{db.name}.corrupt-{stamp}-{n}")
    return candidate


def _temp_name(final: Path) -> Path:
    return final.with_name(f".{final.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def _sweep_temps(db: Path) -> None:
    """Remove temp files (of backups and restores) left by a process that was killed."""
    now = time.time()
    for path in db.parent.glob(f".{db.name}.*.tmp"):
        match = _TEMP.fullmatch(path.name)
        if match is None:
            continue
        try:
            if now - path.stat().st_mtime <= STALE_TEMP_SECONDS:
                os.kill(int(match.group(1)), 0)
                continue  # its writer is alive: a write in flight
        except ProcessLookupError:
            pass
        except (OSError, ValueError, OverflowError):
            continue
        path.unlink(missing_ok=True)
