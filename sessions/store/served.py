"""The store's side of ``llamachat serve``: its chats, found by the exact tokens of a message.

A request to the server is a list of messages, each with the tokens it renders to. Its
chat is the served chat that already holds the longest run of them from the top: the
walk asks, level by level, for the messages under a parent with the same role and the
same token list for the model, which SQLite compares as blobs (the tokens are stored
packed, ``sessions.store.tokens``), so no chat is read whole.
"""

from __future__ import annotations

from collections.abc import Sequence

from sessions.store.database import Database
from sessions.store.lookups import MESSAGE_COLUMNS
from sessions.store.records import message_from_row
from sessions.store.tokens import pack_tokens
from sessions.tree import Message

_COLUMNS = ", ".join(f"m.{column}" for column in MESSAGE_COLUMNS.split(", "))


class ServedChats:
    """Served chats and the messages of theirs a request can reuse; mixed into ``SessionStore``."""

    _db: Database

    def matching_messages(self, fingerprint: str, parent_id: int | None, role: str,
                          tokens: Sequence[int]) -> list[Message]:
        """The messages under ``parent_id`` whose role is ``role`` and whose tokens for the
        model ``fingerprint`` are ``tokens``; with ``parent_id`` None, the first messages of
        every served chat. The chat changed last comes first, then the newest message."""
        blob = pack_tokens(tokens)
        where = "m.parent_id IS NULL AND s.served = 1" if parent_id is None else "m.parent_id = ?"
        args: tuple[object, ...] = (fingerprint, blob, role) + (() if parent_id is None else (parent_id,))
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM messages m JOIN message_tokens t ON t.message_id = m.id"
                " JOIN sessions s ON s.id = m.session_id"
                f" WHERE t.model_fingerprint = ? AND t.tokens = ? AND m.role = ? AND {where}"
                " ORDER BY s.updated_at DESC, m.id DESC", args)
            return [message_from_row(row) for row in rows]

    def prefix_messages(self, fingerprint: str, parent_id: int | None, tokens: Sequence[int]) -> list[Message]:
        """The messages under ``parent_id`` (None: the first messages of every served chat)
        whose tokens for the model ``fingerprint`` begin ``tokens``, the longest first (a
        raw prompt of ``/v1/completions`` has no messages of its own to match by)."""
        blob = pack_tokens(tokens)
        where = "m.parent_id IS NULL AND s.served = 1" if parent_id is None else "m.parent_id = ?"
        args: tuple[object, ...] = (fingerprint, blob, blob) + (() if parent_id is None else (parent_id,))
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM messages m JOIN message_tokens t ON t.message_id = m.id"
                " JOIN sessions s ON s.id = m.session_id"
                " WHERE t.model_fingerprint = ? AND length(t.tokens) > 0 AND length(t.tokens) <= length(?)"
                f" AND substr(?, 1, length(t.tokens)) = t.tokens AND {where}"
                " ORDER BY length(t.tokens) DESC, s.updated_at DESC, m.id DESC", args)
            return [message_from_row(row) for row in rows]

    def served_sessions(self) -> list[tuple[int, float]]:
        """Every served chat as ``(id, updated_at)``, the one changed longest ago first."""
        with self._db.read() as conn:
            rows = conn.execute("SELECT id, updated_at FROM sessions WHERE served = 1 ORDER BY updated_at, id")
            return [(row[0], row[1]) for row in rows]
