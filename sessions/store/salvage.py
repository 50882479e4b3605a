"""Copy what can still be read of a damaged database into the backup that replaced it.

A backup is older than the damage: what the user did since is only in the damaged file.
Damage is usually local (a torn or overwritten page), so most rows can still be read.
This reads the sessions, messages and deletions newer than the backup one id at a time
(a lookup walks from the root, so one bad leaf page loses only the rows on it), inserts
the sessions and messages whose session and parent exist, with their frozen tokens, and
repeats the deletions (``replay``), so nothing the user deleted comes back. A deletion
the backup recorded but the damaged file no longer does was undone since (undoing takes
the deletion off the record): what it removed comes back from the damaged file, so an
undo is not lost either. Then each
session's title and head are brought up to date, remembered branches copied. Everything
goes in one transaction of the restored file; the damaged file is only ever read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sessions.store import replay
from sessions.store.schema import apply_migrations

MAX_LOOKUPS = 1_000_000
"""Past this many ids to try, read the table in one scan instead (stops at the damage)."""


@dataclass(frozen=True)
class Salvage:
    """What was found in the damaged file beyond the backup, and what went in."""

    messages_found: int | None
    """Newer message ids present or unreadable in the damaged file (None: unknown)."""
    messages_recovered: int
    messages_lost: int
    """Newer messages that could not be read, or whose session or parent is missing."""
    sessions_recovered: int
    error: str | None
    """The first read error met, in SQLite's words."""
    deletions: replay.Deletions = field(default_factory=replay.Deletions)
    heads: replay.Heads = field(default_factory=replay.Heads)
    skipped: int = 0
    """Rows read but not usable (a damaged value): left out, and counted here."""
    undone: replay.Undone = field(default_factory=replay.Undone)


def salvage_newer(damaged: Path, restored: Path) -> Salvage:
    """Insert into ``restored`` what ``damaged`` holds beyond it; never raises an Exception.

    Recovery must go on whatever the damaged file holds: a failure here is reported in the
    result (``error``), and a row that cannot be inserted is skipped and counted.
    """
    src: sqlite3.Connection | None = None
    dst: sqlite3.Connection | None = None
    try:
        src = _open_damaged(damaged)
        dst = sqlite3.connect(restored, isolation_level=None)
        apply_migrations(dst)  # the backup may predate a migration the damaged file had
        dst.execute("PRAGMA foreign_keys = ON")
        dst.execute("BEGIN IMMEDIATE")
        result = _Copier(src, dst).run()
        dst.execute("COMMIT")
        return result
    except Exception as error:  # noqa: BLE001 - see the docstring
        if dst is not None and dst.in_transaction:
            try:
                dst.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        return Salvage(None, 0, 0, 0, str(error) or type(error).__name__, replay.Deletions(unknown=True))
    finally:
        for conn in (src, dst):
            if conn is not None:
                conn.close()


def _open_damaged(path: Path) -> sqlite3.Connection:
    """Read-only through its WAL when it has one, else immutable: nothing is written."""
    wal = path.with_name(path.name + "-wal")
    modes = ("mode=ro", "immutable=1") if wal.is_file() else ("immutable=1",)
    for mode in modes:
        conn = sqlite3.connect(path.resolve().as_uri() + "?" + mode, uri=True)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.DatabaseError:
            conn.close()
            if mode == modes[-1]:
                raise
    raise AssertionError("unreachable")


class _Copier:
    def __init__(self, src: sqlite3.Connection, dst: sqlite3.Connection) -> None:
        self.src, self.dst = src, dst
        self.error: str | None = None
        self.skipped = 0
        self.sessions = {row[0] for row in dst.execute("SELECT id FROM sessions")}
        self.messages = {row[0] for row in dst.execute("SELECT id FROM messages")}

    def run(self) -> Salvage:
        old_sessions = sorted(self.sessions)
        newest_message = max(self.messages, default=0)
        new_sessions = self._copy_rows("sessions", max(self.sessions, default=0), self._add_session)[1]
        undone = self._bring_back_undone(newest_message)  # first: newer messages may hang under them
        found, recovered = self._copy_rows("messages", newest_message, self._add_message)
        deletions = self._replay_deletions()
        heads = replay.Heads()
        for session_id in old_sessions + undone.session_ids + new_sessions:
            if session_id in self.sessions:
                self._guarded(self._update_session, {"id": session_id, "recovered": set(recovered),
                                                     "heads": heads})
        lost = (found - len(recovered)) if found is not None else 0
        return Salvage(found, len(recovered), lost, len(new_sessions), self.error, deletions, heads,
                       self.skipped, undone)

    def note(self, error: Exception) -> None:
        if self.error is None:
            self.error = str(error) or type(error).__name__

    def _guarded(self, add: Callable[[dict], bool], row: dict) -> bool:
        """``add(row)`` under a savepoint: a row it cannot take is undone, skipped and counted."""
        if not self.dst.in_transaction:  # SQLite undid it all (a full disk): a savepoint would commit
            raise sqlite3.OperationalError(self.error or "the salvage transaction was rolled back")
        self.dst.execute("SAVEPOINT salvage_row")
        try:
            added = add(row)
        except (sqlite3.Error, TypeError, ValueError, KeyError, OverflowError) as error:
            self.note(error)
            self.skipped += 1
            if self.dst.in_transaction:
                self.dst.execute("ROLLBACK TO salvage_row")
            added = False
        if self.dst.in_transaction:
            self.dst.execute("RELEASE salvage_row")
        return added

    def _columns(self, table: str) -> list[str]:
        mine = [row[1] for row in self.dst.execute(f"PRAGMA table_info({table})")]
        try:
            theirs = {row[1] for row in self.src.execute(f"PRAGMA table_info({table})")}
        except sqlite3.DatabaseError as error:
            self.note(error)
            return mine
        return [name for name in mine if name in theirs]

    def _copy_rows(self, table: str, after: int, add: Callable[[dict], bool]) -> tuple[int | None, list[int]]:
        """(ids found or unreadable beyond ``after`` — None if unknown, ids added)."""
        columns = self._columns(table)
        found: int | None = 0
        added: list[int] = []
        for row in self._rows_after(table, columns, after):
            if row is None:
                found = None
                continue
            if found is not None:
                found += 1
            if isinstance(row, dict) and self._guarded(add, row):
                added.append(row["id"])
        return found, added

    def _rows_after(self, table: str, columns: list[str], after: int) -> Iterator[dict | int | None]:
        """Rows as dicts, an id that could not be read as that int, None for "unknown"."""
        select = f"SELECT {', '.join(columns)} FROM {table}"
        last = self._last_id(table)
        if last is not None and last - after <= MAX_LOOKUPS:
            for row_id in range(after + 1, last + 1):
                try:
                    row = self.src.execute(f"{select} WHERE id = ?", (row_id,)).fetchone()
                except sqlite3.DatabaseError as error:
                    self.note(error)
                    yield row_id
                    continue
                if row is not None:
                    yield dict(zip(columns, row, strict=True))
            return
        try:
            for row in self.src.execute(f"{select} WHERE id > ? ORDER BY id", (after,)):
                yield dict(zip(columns, row, strict=True))
        except sqlite3.DatabaseError as error:
            self.note(error)
        yield None  # the scan cannot say how many rows it missed

    def _last_id(self, table: str) -> int | None:
        for query in (f"SELECT max(id) FROM {table}",
                      "SELECT seq FROM sqlite_sequence WHERE name = ?"):
            try:
                row = self.src.execute(query, (table,) if "?" in query else ()).fetchone()
            except sqlite3.DatabaseError as error:
                self.note(error)
                continue
            return int(row[0]) if row is not None and row[0] is not None else 0
        return None

    def _insert(self, table: str, row: dict, verb: str = "INSERT") -> None:
        names = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self.dst.execute(f"{verb} INTO {table}({names}) VALUES ({marks})", tuple(row.values()))

    def _add_session(self, row: dict) -> bool:
        self._insert("sessions", {**row, "active_leaf_id": None} if "active_leaf_id" in row else row)
        self.sessions.add(row["id"])
        return True

    def _add_message(self, row: dict) -> bool:
        parent = row.get("parent_id")
        if row.get("session_id") not in self.sessions or (parent is not None and parent not in self.messages):
            return False
        self._insert("messages", row)
        try:
            tokens = self.src.execute(
                "SELECT model_fingerprint, tokens FROM message_tokens WHERE message_id = ?", (row["id"],)
            ).fetchall()
        except sqlite3.DatabaseError as error:
            self.note(error)  # the message stays; its tokens are derived again from the text
            tokens = []
        for fingerprint, blob in tokens:
            self._insert("message_tokens", {"message_id": row["id"], "model_fingerprint": fingerprint,
                                            "tokens": blob}, "INSERT OR REPLACE")
        self.messages.add(row["id"])  # last: a row undone by ``_guarded`` must not count as here
        return True

    def _bring_back_undone(self, upto: int) -> replay.Undone:
        """Put back what deletions undone after the backup removed, as the damaged file
        holds it: the session row and its messages, or the subtree's messages (those up to
        ``upto``; newer ones are copied with the other newer messages). Each row is read on
        its own, so one bad page loses only the rows on it."""
        undone = replay.Undone()
        if set(self._columns("deletions")) != {"id", "kind", "target", "deleted_at"}:
            undone.unknown = bool(self.dst.execute("SELECT 1 FROM deletions LIMIT 1").fetchone())
            return undone
        for deletion_id, kind, target in self.dst.execute(
                "SELECT id, kind, target FROM deletions ORDER BY id").fetchall():
            try:
                if self.src.execute("SELECT 1 FROM deletions WHERE id = ?", (deletion_id,)).fetchone():
                    continue  # still deleted
                if kind == "session" and not self._bring_back_session(target, undone):
                    continue
                ids = self._removed_message_ids(kind, target, upto)
            except sqlite3.DatabaseError as error:
                self.note(error)
                undone.unknown = True
                continue
            for row in self._rows_by_id("messages", ids):
                if isinstance(row, int):
                    undone.lost += 1
                elif row["id"] not in self.messages:
                    if self._guarded(self._add_message, row):
                        undone.messages += 1
                    else:
                        undone.lost += 1
            self.dst.execute("DELETE FROM deletions WHERE id = ?", (deletion_id,))  # undone: never replayed
        return undone

    def _bring_back_session(self, session_id: int, undone: replay.Undone) -> bool:
        """The session row of an undone chat deletion; False when the damaged file has none."""
        if session_id in self.sessions:
            return True
        for row in self._rows_by_id("sessions", [session_id]):
            if isinstance(row, int):
                raise sqlite3.DatabaseError(self.error or "the chat's row could not be read")
            if self._guarded(self._add_session, row):
                undone.session_ids.append(session_id)
                return True
        return False

    def _removed_message_ids(self, kind: str, target: int, upto: int) -> list[int]:
        """The ids of the messages an undone deletion had removed, read from the indexes
        (no message's own page), parents first."""
        if kind == "session":
            ids = [row[0] for row in self.src.execute("SELECT id FROM messages WHERE session_id = ?", (target,))]
        else:
            ids, level = [], [target]
            while level:
                ids += level
                marks = ",".join("?" * len(level))
                level = [row[0] for row in self.src.execute(
                    f"SELECT id FROM messages WHERE parent_id IN ({marks})", tuple(level))]
        return sorted(message_id for message_id in ids if message_id <= upto)

    def _rows_by_id(self, table: str, ids: list[int]) -> Iterator[dict | int]:
        """Each row of ``ids`` as a dict, or its id when it could not be read."""
        columns = self._columns(table)
        select = f"SELECT {', '.join(columns)} FROM {table} WHERE id = ?"
        for row_id in ids:
            try:
                row = self.src.execute(select, (row_id,)).fetchone()
            except sqlite3.DatabaseError as error:
                self.note(error)
                yield row_id
                continue
            if row is not None:
                yield dict(zip(columns, row, strict=True))

    def _replay_deletions(self) -> replay.Deletions:
        """Repeat what was deleted after the backup; ``unknown`` when that cannot be read."""
        if set(self._columns("deletions")) != {"id", "kind", "target", "deleted_at"}:
            return replay.Deletions(unknown=True)  # the damaged file's table is unreadable
        after = self.dst.execute("SELECT coalesce(max(id), 0) FROM deletions").fetchone()[0]
        done = replay.Deletions()
        found, repeated = self._copy_rows("deletions", after, lambda row: replay.repeat_deletion(self.dst, row, done))
        done.unknown = found is None or found > len(repeated)
        self.sessions = {row[0] for row in self.dst.execute("SELECT id FROM sessions")}
        self.messages = {row[0] for row in self.dst.execute("SELECT id FROM messages")}
        return done

    def _update_session(self, job: dict) -> bool:
        """Newer title, update time and head, and remembered branches, when readable."""
        session_id, recovered, heads = job["id"], job["recovered"], job["heads"]
        try:
            row = self.src.execute(
                "SELECT title, updated_at, active_leaf_id FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            remembered = self.src.execute(
                "SELECT parent_key, child_id FROM remembered_children WHERE session_id = ?", (session_id,)
            ).fetchall()
        except sqlite3.DatabaseError as error:
            self.note(error)
            replay.head_unreadable(self.dst, session_id, recovered, heads)
            return True
        if row is None:
            return True
        title, updated_at, leaf = row
        mine = self.dst.execute("SELECT updated_at FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if mine is not None and updated_at is not None and updated_at >= mine[0]:
            self.dst.execute("UPDATE sessions SET title = ?, updated_at = ? WHERE id = ?",
                             (title, updated_at, session_id))
            replay.restore_head(self.src, self.dst, session_id, leaf, self.messages, heads, self.note)
        for parent_key, child_id in remembered:
            if child_id in self.messages:
                self._insert("remembered_children", {"session_id": session_id, "parent_key": parent_key,
                                                     "child_id": child_id}, "INSERT OR REPLACE")
        return True
