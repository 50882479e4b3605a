"""Deleted rows kept in memory, so that a deletion can be undone while the app runs.

A deletion commits at once (another process, a crash or a recovery from the backup must
see it), and the rows it removed are read first, in the same transaction, into a
``Deleted``. Putting them back inserts the same rows with their own ids (ids are never
handed out again, so none can be taken meanwhile), gives the chat its head back if it
still stands where the deletion moved it (another window may have gone on from there:
its newer work stays shown, and the branch comes back beside it), and takes the
deletion off the record a recovery replays. Nothing is written anywhere else: after the app closes a deletion is
final, as before.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Literal

from sessions.store import lookups
from sessions.store.errors import NothingToUndo

Rows = tuple[tuple[str, tuple[str, ...], tuple[tuple[object, ...], ...]], ...]
"""(table, its columns, the rows) for each table a deletion removed rows from."""


@dataclass(frozen=True)
class Deleted:
    """What one deletion removed: enough to put it back exactly."""

    kind: Literal["session", "subtree"]
    session_id: int
    target: int
    """The session's id, or the top message of the subtree."""
    count: int
    """Messages removed."""
    rows: Rows
    head: int | None
    """The chat's head before the deletion."""
    parent_id: int | None
    """What the subtree hung from (None: the chat's first message, or a whole session)."""
    deletion_id: int
    """The row that records the deletion for a recovery's replay."""
    left_at: int | None = None
    """The chat's head right after the deletion: undoing moves the head back only from there."""

    def message_ids(self) -> set[int]:
        """The messages it removed."""
        for table, columns, rows in self.rows:
            if table == "messages":
                at = columns.index("id")
                return {int(row[at]) for row in rows}  # type: ignore[call-overload]
        return set()


def _rows(conn: sqlite3.Connection, table: str, where: str, args: tuple[object, ...]) -> tuple[tuple[str, ...], tuple]:
    cursor = conn.execute(f"SELECT * FROM {table} WHERE {where}", args)
    return tuple(d[0] for d in cursor.description), tuple(cursor.fetchall())


def delete_subtree(conn: sqlite3.Connection, session_id: int, message_id: int, parent_id: int | None) -> Deleted:
    """``lookups.delete_subtree``, keeping what it removes (inside the caller's transaction)."""
    ids = lookups.subtree_ids(conn, message_id)
    marks = ",".join("?" * len(ids))
    head = conn.execute("SELECT active_leaf_id FROM sessions WHERE id = ?", (session_id,)).fetchone()[0]
    rows = tuple((table, *_rows(conn, table, f"{column} IN ({marks})", tuple(ids)))
                 for table, column in (("messages", "id"), ("message_tokens", "message_id"),
                                       ("remembered_children", "child_id")))
    count = lookups.delete_subtree(conn, session_id, message_id, parent_id)
    deletion = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
    left_at = conn.execute("SELECT active_leaf_id FROM sessions WHERE id = ?", (session_id,)).fetchone()[0]
    return Deleted("subtree", session_id, message_id, count, rows, head, parent_id, int(deletion), left_at)


def delete_session(conn: sqlite3.Connection, session_id: int) -> Deleted:
    """``lookups.delete_session``, keeping what it removes (inside the caller's transaction)."""
    message_ids = "SELECT id FROM messages WHERE session_id = ?"
    rows = tuple((table, *_rows(conn, table, where, (session_id,))) for table, where in (
        ("sessions", "id = ?"), ("messages", "session_id = ?"),
        ("message_tokens", f"message_id IN ({message_ids})"), ("remembered_children", "session_id = ?")))
    head = conn.execute("SELECT active_leaf_id FROM sessions WHERE id = ?", (session_id,)).fetchone()[0]
    count = lookups.delete_session(conn, session_id)
    deletion = conn.execute("SELECT last_insert_rowid()").fetchone()[0]
    return Deleted("session", session_id, session_id, count, rows, head, None, int(deletion))


def put_back(conn: sqlite3.Connection, deleted: Deleted) -> bool:
    """Insert ``deleted``'s rows again (inside the caller's transaction); whether the head
    came back with them (False: it was elsewhere, or it moved on since the deletion)."""
    if deleted.kind == "subtree":
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (deleted.session_id,)).fetchone() is None:
            raise NothingToUndo(f"the chat those messages were in (session {deleted.session_id}) is deleted too")
        if deleted.parent_id is not None and conn.execute(
                "SELECT 1 FROM messages WHERE id = ?", (deleted.parent_id,)).fetchone() is None:
            raise NothingToUndo(f"the message they followed (message {deleted.parent_id}) is deleted too")
    for table, columns, rows in deleted.rows:
        if not rows:
            continue
        names = ", ".join(columns)
        marks = ", ".join("?" * len(columns))
        # A remembered child chosen since for the same parent stays: it is the newer choice.
        verb = "INSERT OR IGNORE" if table == "remembered_children" else "INSERT"
        if table == "sessions":  # its head is a message not back yet: set once they are
            rows = tuple(tuple(None if c == "active_leaf_id" else v for c, v in zip(columns, row, strict=True))
                         for row in rows)
        conn.executemany(f"{verb} INTO {table}({names}) VALUES ({marks})", rows)
    now = conn.execute("SELECT active_leaf_id FROM sessions WHERE id = ?", (deleted.session_id,)).fetchone()[0]
    back = deleted.kind == "session" or (deleted.head in deleted.message_ids() and now == deleted.left_at)
    if back:
        # The head was in what went and nobody moved it since: it comes back with it, as the branch shown.
        conn.execute("UPDATE sessions SET active_leaf_id = ? WHERE id = ?", (deleted.head, deleted.session_id))
    conn.execute("DELETE FROM deletions WHERE id = ?", (deleted.deletion_id,))
    lookups.touch(conn, deleted.session_id)
    return back
