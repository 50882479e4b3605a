"""The frozen token lists of messages: the part of the store the engine reads and fills.

Kept apart from ``SessionStore``'s sessions and messages (which it extends) because only
the engine side uses it: ``controller.branch_tokens`` reads a session's lists and stores the ones
it computes. Lists come in only from this program's own tokenizer and sampler, never
from an imported file (see ``sessions.exchange.json_format``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sessions.store import fingerprints, lookups
from sessions.store.database import Database
from sessions.store.tokens import unpack_tokens


class FrozenTokens:
    """Token lists per message and model fingerprint; mixed into ``SessionStore``."""

    _db: Database

    def set_tokens(self, message_id: int, model_fingerprint: str, tokens: Sequence[int]) -> None:
        with self._db.transaction() as conn:
            lookups.message(conn, message_id)
            lookups.put_tokens(conn, message_id, model_fingerprint, tokens)

    def set_tokens_many(self, model_fingerprint: str, lists: Sequence[tuple[int, Sequence[int]]]) -> int:
        """Store many messages' lists for one model in one transaction (a whole imported
        chat's, a batch at a time); messages deleted meanwhile are skipped. Returns how
        many were stored."""
        with self._db.transaction() as conn:
            stored = 0
            for message_id, tokens in lists:
                if conn.execute("SELECT 1 FROM messages WHERE id = ?", (message_id,)).fetchone() is None:
                    continue
                lookups.put_tokens(conn, message_id, model_fingerprint, tokens)
                stored += 1
            return stored

    def get_tokens(self, message_id: int, model_fingerprint: str) -> list[int] | None:
        """One message's list for one model (None: none stored). The engine reads a
        session's lists at once (``session_tokens``); this single read lets tests and
        benchmarks check what was frozen."""
        with self._db.read() as conn:
            row = conn.execute(
                "SELECT tokens FROM message_tokens WHERE message_id = ? AND model_fingerprint = ?",
                (message_id, model_fingerprint),
            ).fetchone()
            return None if row is None else unpack_tokens(row[0])

    def fingerprints_used_with(self, *model_paths: str) -> set[str]:
        """Model fingerprints recorded by sessions that used one of these model files."""
        with self._db.read() as conn:
            return fingerprints.fingerprints_of_sessions(conn, model_paths)

    def refile_tokens(self, old: str, new: str) -> int:
        """File the frozen tokens kept under fingerprint ``old`` under ``new``; returns how many."""
        with self._db.transaction() as conn:
            return fingerprints.refile_tokens(conn, old, new)

    def message_parents(self, session_id: int) -> dict[int, int | None]:
        """Each message of a session and its parent (None at the top): the tree's shape alone."""
        with self._db.read() as conn:
            rows = conn.execute("SELECT id, parent_id FROM messages WHERE session_id = ?", (session_id,))
            return {message_id: parent_id for message_id, parent_id in rows}

    def root_tokens(self, model_fingerprint: str) -> dict[int, list[list[int]]]:
        """The tokens of every session's top-level messages for one model: session id ->
        one list per top-level message frozen for it. Sessions that can share a
        checkpoint begin alike, so these narrow the search for the sessions that may."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT m.session_id, t.tokens FROM messages m JOIN message_tokens t ON t.message_id = m.id"
                " WHERE m.parent_id IS NULL AND t.model_fingerprint = ? ORDER BY m.session_id, m.id",
                (model_fingerprint,),
            )
            found: dict[int, list[list[int]]] = {}
            for session_id, blob in rows:
                found.setdefault(session_id, []).append(unpack_tokens(blob))
            return found

    def models_by_fingerprint(self) -> dict[str, str]:
        """The model file each recorded fingerprint was last loaded from, for naming its
        checkpoint folder."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT model_fingerprint, model_path FROM sessions WHERE model_fingerprint IS NOT NULL"
                " AND model_path IS NOT NULL ORDER BY updated_at")
            return {fingerprint: path for fingerprint, path in rows}

    def session_tokens(self, session_id: int) -> dict[int, dict[str, list[int]]]:
        """Every frozen token list of a session: ``{message_id: {fingerprint: tokens}}``."""
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT t.message_id, t.model_fingerprint, t.tokens FROM message_tokens t"
                " JOIN messages m ON m.id = t.message_id WHERE m.session_id = ?"
                " ORDER BY t.message_id, t.model_fingerprint",
                (session_id,),
            )
            found: dict[int, dict[str, list[int]]] = {}
            for message_id, fingerprint, blob in rows:
                found.setdefault(message_id, {})[fingerprint] = unpack_tokens(blob)
            return found
