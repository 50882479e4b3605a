"""Row-level reads and writes shared by the store's methods.

Each function runs inside a read or a transaction that the caller already holds, and
turns "not there" or "not yours" into the store's plain-words errors, so every public
method validates ids the same way.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from sessions.store.errors import MessageNotFound, SessionNotFound, StoreError
from sessions.store.records import Session, message_from_row, session_from_row
from sessions.store.tokens import pack_tokens
from sessions.tree import Message

MESSAGE_COLUMNS = "id, session_id, parent_id, role, text, created_at, stats"


def session(conn: sqlite3.Connection, session_id: int) -> Session:
    row = conn.execute("SELECT * FROM sessions WHERE id = ?", (session_id,)).fetchone()
    if row is None:
        raise SessionNotFound(session_id)
    return session_from_row(row)


def message(conn: sqlite3.Connection, message_id: int) -> Message:
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


def put_tokens(conn: sqlite3.Connection, message_id: int, fingerprint: str, tokens: Sequence[int]) -> None:
    if not isinstance(fingerprint, str) or not fingerprint:
        raise StoreError("a model fingerprint (a non-empty string) is needed to store tokens")
    conn.execute(
        "INSERT OR REPLACE INTO message_tokens(message_id, model_fingerprint, tokens)"
        " VALUES (?, ?, ?)",
        (message_id, fingerprint, pack_tokens(tokens)),
    )


def touch(conn: sqlite3.Connection, session_id: int) -> None:
    """Mark the session as just changed (never moving its time backwards)."""
    conn.execute(
        "UPDATE sessions SET updated_at = max(updated_at, ?) WHERE id = ?",
        (time.time(), session_id),
    )
