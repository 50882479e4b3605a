"""Row-level reads and writes shared by the store's methods.

Each function runs inside a read or a transaction that the caller already holds, and
turns "not there" or "not yours" into the store's plain-words errors, so every public
method validates ids the same way.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping, Sequence

from sessions.store.errors import MessageNotFound, SessionNotFound, StoreError
from sessions.store.records import Session, message_from_row, session_from_row, stats_to_json, title_from_text
from sessions.store.tokens import pack_tokens
from sessions.store.values import check_text, is_id
from sessions.tree import ROLES, GenerationStats, Message

MESSAGE_COLUMNS = "id, session_id, parent_id, role, text, created_at, stats"


def session(conn: sqlite3.Connection, session_id: int) -> Session:
    if not is_id(session_id):
        raise SessionNotFound(session_id)
    row = conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    return session_from_row(row)


def message(conn: sqlite3.Connection, message_id: int) -> Message:
    if not is_id(message_id):
        raise MessageNotFound(message_id)
    row = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ?", (message_id,)
    ).fetchone()
    if row is None:
        raise MessageNotFound(message_id)
    return message_from_row(row)


def message_in(conn: sqlite3.Connection, session_id: int, message_id: int) -> Message:
    """The message, provided it belongs to ``session_id``."""
    found = message(conn, message_id)
    if found.session_id != session_id:
        raise StoreError(
            f"message {message_id} belongs to session {found.session_id}, not session {session_id}"
        )
    return found


def remember(conn: sqlite3.Connection, session_id: int, parent_id: int | None, child_id: int) -> None:
    """Record ``child_id`` as the branch last seen under ``parent_id`` (None: the top level)."""
    child = message_in(conn, session_id, child_id)
    if child.parent_id != parent_id:
        where = "the top level" if parent_id is None else f"message {parent_id}"
        raise StoreError(f"message {child_id} is not a child of {where}")
    conn.execute(
        "INSERT OR REPLACE INTO remembered_children(session_id, parent_key, child_id)"
        " VALUES (?, ?, ?)",
        (session_id, parent_id or 0, child_id),
    )


def remember_path(conn: sqlite3.Connection, session_id: int, leaf_id: int) -> None:
    """Remember every step of the path to ``leaf_id`` as the branch shown under its parent."""
    conn.execute(
        "WITH RECURSIVE up(id, parent_id) AS (SELECT id, parent_id FROM messages WHERE id = ?"
        " UNION ALL SELECT m.id, m.parent_id FROM messages m JOIN up ON m.id = up.parent_id)"
        " INSERT OR REPLACE INTO remembered_children(session_id, parent_key, child_id)"
        " SELECT ?, coalesce(up.parent_id, 0), up.id FROM up WHERE NOT EXISTS ("
        "  SELECT 1 FROM remembered_children r WHERE r.session_id = ?"
        "  AND r.parent_key = coalesce(up.parent_id, 0) AND r.child_id = up.id)",
        (leaf_id, session_id, session_id),
    )


def check_message(role: str, text: str) -> None:
    if role not in ROLES:
        raise StoreError(f"unknown role {role!r}: expected one of {', '.join(ROLES)}")
    check_text(text)


def insert_message(conn: sqlite3.Connection, session: Session, parent_id: int | None, role: str, text: str,
                   stats: GenerationStats | None, tokens: Mapping[str, Sequence[int]] | None,
                   created_at: float | None) -> Message:
    """Insert a checked message with its frozen tokens; a first user message titles the session."""
    message_id = insert_row(conn, session.id, parent_id, role, text, stats_to_json(stats), created_at)
    for fingerprint, sequence in (tokens or {}).items():
        put_tokens(conn, message_id, fingerprint, sequence)
    if role == "user":
        title_untitled(conn, session, text)
    touch(conn, session.id)
    return message(conn, message_id)


def insert_row(conn: sqlite3.Connection, session_id: int, parent_id: int | None, role: str, text: str,
               stats_json: str | None, created_at: float | None) -> int:
    """Insert one checked message row (no time: now); returns its id."""
    cursor = conn.execute(
        "INSERT INTO messages(session_id, parent_id, role, text, created_at, stats)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (session_id, parent_id, role, text, created_at if created_at is not None else time.time(), stats_json),
    )
    if cursor.lastrowid is None:  # SQLite sets it after every INSERT; this keeps the type exact
        raise StoreError("the message could not be saved")
    return cursor.lastrowid


def title_untitled(conn: sqlite3.Connection, session: Session, first_user_text: str) -> None:
    """Name a session that has no title after its first user message."""
    if not session.title:
        conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (title_from_text(first_user_text), session.id))


def put_tokens(conn: sqlite3.Connection, message_id: int, fingerprint: str, tokens: Sequence[int]) -> None:
    if not isinstance(fingerprint, str) or not fingerprint:
        raise StoreError("a model fingerprint (a non-empty string) is needed to store tokens")
    conn.execute(
        "INSERT OR REPLACE INTO message_tokens(message_id, model_fingerprint, tokens)"
        " VALUES (?, ?, ?)",
        (message_id, fingerprint, pack_tokens(tokens)),
    )


def touch(conn: sqlite3.Connection, session_id: int, at: float | None = None) -> None:
    """Mark the session as changed ``at`` (None: now), never moving its time backwards."""
    conn.execute(
        "UPDATE sessions SET updated_at = max(updated_at, ?) WHERE id = ?",
        (time.time() if at is None else at, session_id),
    )


# -- deleting ----------------------------------------------------------------------------

_SUBTREE = ("WITH RECURSIVE sub(id) AS (SELECT ? UNION ALL"
            " SELECT m.id FROM messages m JOIN sub ON m.parent_id = sub.id)")


def subtree_ids(conn: sqlite3.Connection, message_id: int) -> list[int]:
    """``message_id`` and every message below it."""
    return [row[0] for row in conn.execute(f"{_SUBTREE} SELECT id FROM sub", (message_id,))]


def delete_subtree(conn: sqlite3.Connection, session_id: int, message_id: int, parent_id: int | None,
                   *, record: bool = True) -> int:
    """Delete a message and everything below it, recording the deletion; returns the count.

    A head inside the subtree moves to the deleted message's parent; remembered children
    that pointed into it go with it (their rows cascade).
    """
    count = conn.execute(f"{_SUBTREE} SELECT count(*) FROM sub", (message_id,)).fetchone()[0]
    conn.execute(
        f"{_SUBTREE} UPDATE sessions SET active_leaf_id = ?"
        " WHERE id = ? AND active_leaf_id IN (SELECT id FROM sub)",
        (message_id, parent_id, session_id),
    )
    conn.execute(f"{_SUBTREE} DELETE FROM messages WHERE id IN (SELECT id FROM sub)", (message_id,))
    if record:
        record_deletion(conn, "subtree", message_id)
    return int(count)


def delete_session(conn: sqlite3.Connection, session_id: int, *, record: bool = True) -> int:
    """Delete a session with all its messages (they cascade); returns how many messages went."""
    count = conn.execute("SELECT count(*) FROM messages WHERE session_id = ?", (session_id,)).fetchone()[0]
    conn.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
    if record:
        record_deletion(conn, "session", session_id)
    return int(count)


def record_deletion(conn: sqlite3.Connection, kind: str, target: int, at: float | None = None,
                    row_id: int | None = None) -> None:
    """Note a deletion in the same transaction, so a recovery from an older backup repeats it."""
    conn.execute("INSERT INTO deletions(id, kind, target, deleted_at) VALUES (?, ?, ?, ?)",
                 (row_id, kind, target, time.time() if at is None else at))
