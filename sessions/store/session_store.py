"""The session store: every session, message, remembered branch and frozen token list.

One SQLite file holds it all. Each public method is one transaction that has committed
by the time the method returns ("every change is committed before it is reported as
done"), and ``transaction()`` lets a caller group several calls into one unit, as the
importers do so that a failed import leaves nothing behind.

Several processes may use one database at once (the app in one terminal, ``ask`` in
another). The gestures that act on what a user saw therefore take what the caller saw
and check it inside their write transaction: ``append_message`` fails with ``HeadMoved``
when the session's head is no longer the one the caller built on, ``delete_subtree``
with ``SubtreeChanged`` when the branch holds other messages than those the user was
asked about; both are ``ChatChanged``, and nothing is written. ``load_session_tree``
reads a session and its tree in one read transaction, so the head is always in the tree.
"""

from __future__ import annotations

import json
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sessions import paths
from sessions.sampling import SamplingSettings
from sessions.store import lookups, undo
from sessions.store import search as search_queries
from sessions.store.database import Database
from sessions.store.errors import (
    HeadMoved,
    MessageNotFound,
    ParentGone,
    SessionNotFound,
    StoreError,
    SubtreeChanged,
)
from sessions.store.lookups import MESSAGE_COLUMNS
from sessions.store.opening import BUSY_TIMEOUT, open_database
from sessions.store.records import (
    NewMessage,
    SearchHit,
    Session,
    SessionSummary,
    message_from_row,
    stats_to_json,
)
from sessions.store.served import ServedChats
from sessions.store.token_store import FrozenTokens
from sessions.store.undo import Deleted
from sessions.store.values import check_text, check_time, is_id
from sessions.tree import ConversationTree, GenerationStats, Message

_UNSET: Any = object()
_SUMMARY_QUERY = (
    "SELECT s.*,"
    " (SELECT count(*) FROM messages m WHERE m.session_id = s.id) AS message_count"
    " FROM sessions s ORDER BY s.updated_at DESC, s.id DESC"
)


class SessionStore(FrozenTokens, ServedChats):
    """All persistent chat data, behind methods that validate and commit."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self.recovery_notice: str | None = database.recovery_notice  # show it to the user

    @classmethod
    def open(cls, path: Path | None = None, *, busy_timeout: float = BUSY_TIMEOUT) -> SessionStore:
        """Open the database (the default one without ``path``).

        ``busy_timeout`` is how long a statement waits for another program's lock before
        failing with ``DatabaseBusy``.
        """
        database = open_database(Path(path) if path is not None else paths.database_file(),
                                 busy_timeout=busy_timeout)
        return cls(database)

    @property
    def path(self) -> Path:
        return self._db.path

    @property
    def read_only(self) -> str | None:
        """Why the database could only be opened for reading; None when it is writable."""
        return self._db.read_only

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group several store calls: all of them are saved, or none."""
        with self._db.transaction():
            yield

    # -- sessions --------------------------------------------------------------------

    def create_session(
        self,
        *,
        title: str = "",
        model_path: str | None = None,
        model_fingerprint: str | None = None,
        system_prompt: str | None = None,
        sampling: SamplingSettings | None = None,
        created_at: float | None = None,
        served: bool = False,
    ) -> Session:
        """``served``: a chat ``llamachat serve`` keeps (``Session.served``)."""
        now = time.time()
        settings = sampling or SamplingSettings()
        check_text(title, "the title")
        for value, what in ((system_prompt, "the system prompt"), (model_path, "the model path")):
            if value is not None:
                check_text(value, what)
        created_at = check_time(created_at, "the session's creation time")
        with self._db.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO sessions(title, created_at, updated_at, model_path,"
                " model_fingerprint, system_prompt, sampling" + (", served" if served else "") + ")"
                " VALUES (?, ?, ?, ?, ?, ?, ?" + (", 1" if served else "") + ")",
                # A session made at a given time (an import) was last changed then, not now:
                # its messages' times move it on (``add_messages``).
                (title, created_at if created_at is not None else now,
                 created_at if created_at is not None else now, model_path,
                 model_fingerprint, system_prompt, json.dumps(settings.to_dict())),
            )
            assert cursor.lastrowid is not None  # an INSERT always sets it
            return lookups.session(conn, cursor.lastrowid)

    def get_session(self, session_id: int) -> Session:
        with self._db.read() as conn:
            return lookups.session(conn, session_id)

    def list_sessions(self, search: str | None = None) -> list[SessionSummary]:
        """Newest updated first; ``search`` keeps sessions whose title or messages match."""
        with self._db.read() as conn:
            wanted = search_queries.matching_session_ids(conn, search or "")
            return [
                SessionSummary(row["id"], row["title"], row["updated_at"], row["message_count"],
                               bool(row["served"]) if "served" in row.keys() else False)
                for row in conn.execute(_SUMMARY_QUERY)
                if wanted is None or row["id"] in wanted
            ]

    def models_used(self) -> list[tuple[str, float]]:
        """Each model file a saved chat names, with the time that chat last changed, the
        most recent first (the model picker lists them before the others)."""
        with self._db.read() as conn:
            return [(row["model_path"], row["at"]) for row in conn.execute(
                "SELECT model_path, max(updated_at) AS at FROM sessions WHERE model_path IS NOT NULL"
                " AND model_path != '' GROUP BY model_path ORDER BY at DESC")]

    def rename_session(self, session_id: int, title: str) -> Session:
        check_text(title, "the title")
        with self._db.transaction() as conn:
            lookups.session(conn, session_id)
            conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (title, session_id))
            lookups.touch(conn, session_id)
            return lookups.session(conn, session_id)

    def update_session(
        self,
        session_id: int,
        *,
        model_path: str | None = _UNSET,
        model_fingerprint: str | None = _UNSET,
        system_prompt: str | None = _UNSET,
        sampling: SamplingSettings = _UNSET,
    ) -> Session:
        """Change only the fields given (``None`` clears a field).

        The session is re-dated only when what its replies are written with changes (its
        system prompt, its sampling): recording the model a chat is opened or goes on with
        is not a change to the chat, and must not move it to the top of the list."""
        changes: dict[str, Any] = {}
        for name, value in (("model_path", model_path), ("model_fingerprint", model_fingerprint),
                            ("system_prompt", system_prompt)):
            if value is not _UNSET:
                changes[name] = value
        if sampling is not _UNSET:
            changes["sampling"] = json.dumps((sampling or SamplingSettings()).to_dict())
        with self._db.transaction() as conn:
            before = lookups.session(conn, session_id)
            for column, value in changes.items():
                conn.execute(f"UPDATE sessions SET {column} = ? WHERE id = ?", (value, session_id))
            after = lookups.session(conn, session_id)
            if (before.system_prompt, before.sampling) != (after.system_prompt, after.sampling):
                lookups.touch(conn, session_id)
            return after

    def delete_session(self, session_id: int) -> None:
        """Delete a session; one whose stored settings are damaged (``DatabaseDamaged`` on
        reading it) can still be deleted, so only its existence is checked, not its row."""
        with self._db.transaction() as conn:
            found = is_id(session_id) and conn.execute(
                "SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is not None
            if not found:
                raise SessionNotFound(session_id)
            lookups.delete_session(conn, session_id)

    def set_active_leaf(
        self,
        session_id: int,
        message_id: int | None,
        *,
        remember: Mapping[int | None, int] | None = None,
    ) -> None:
        """Move the session's head; ``remember`` also records remembered children, atomically."""
        with self._db.transaction() as conn:
            lookups.session(conn, session_id)
            if message_id is not None:
                lookups.message_in(conn, session_id, message_id)
            for parent_id, child_id in (remember or {}).items():
                lookups.remember(conn, session_id, parent_id, child_id)
            conn.execute(
                "UPDATE sessions SET active_leaf_id = ? WHERE id = ?", (message_id, session_id)
            )

    # -- messages --------------------------------------------------------------------

    def add_message(
        self,
        session_id: int,
        parent_id: int | None,
        role: str,
        text: str,
        *,
        stats: GenerationStats | None = None,
        tokens: Mapping[str, Sequence[int]] | None = None,
        created_at: float | None = None,
    ) -> Message:
        """Add a message under ``parent_id``; the head does not move (see ``append_message``)."""
        lookups.check_message(role, text)
        created_at = check_time(created_at, "the message's time")
        with self._db.transaction(crash_label="store") as conn:
            session = lookups.session(conn, session_id)
            if parent_id is not None:
                lookups.message_in(conn, session_id, parent_id)
            return lookups.insert_message(conn, session, parent_id, role, text, stats, tokens, created_at)

    def add_messages(self, session_id: int, messages: Sequence[NewMessage]) -> list[int]:
        """Add many messages at once (an imported tree); their ids, in the order given.

        Every value is checked and encoded before the write transaction, and inside it
        each message is one INSERT: no parent is looked up and no row read back, as
        ``add_message`` does. The store's lock is held meanwhile, so the app's reads wait
        for the inserts alone. A parent, given by its position, must come before its
        children. The head does not move.
        """
        rows = []
        for index, message in enumerate(messages):
            lookups.check_message(message.role, message.text)
            if message.parent is not None and not 0 <= message.parent < index:
                raise StoreError(f"message {index + 1} of {len(messages)} names as its parent "
                                 f"position {message.parent}, which does not come before it")
            rows.append((message.parent, message.role, message.text, stats_to_json(message.stats),
                         check_time(message.created_at, "the message's time")))
        first_question = next((message.text for message in messages if message.role == "user"), None)
        with self._db.transaction() as conn:
            session = lookups.session(conn, session_id)
            ids: list[int] = []
            for parent, role, text, stats, created_at in rows:
                parent_id = None if parent is None else ids[parent]
                ids.append(lookups.insert_row(conn, session_id, parent_id, role, text, stats, created_at))
            if first_question is not None:
                lookups.title_untitled(conn, session, first_question)
            if ids:  # changed when its last message was written (an old chat imported keeps its date)
                times = [created_at for *_, created_at in rows]
                lookups.touch(conn, session_id, None if None in times else max(t for t in times if t is not None))
            return ids

    def append_message(
        self,
        session_id: int,
        parent_id: int | None,
        role: str,
        text: str,
        *,
        expected_head: int | None,
        stats: GenerationStats | None = None,
        tokens: Mapping[str, Sequence[int]] | None = None,
    ) -> Message:
        """Add a message and make it the session's head, if the chat is as the caller saw it.

        ``expected_head`` is the head the caller's gesture was made on (what the user saw).
        In one write transaction: the session's head must still be ``expected_head``
        (``HeadMoved`` otherwise) and ``parent_id`` must still exist (``ParentGone``); then
        the message goes in, becomes the head, and every step of its path is remembered as
        the branch shown under its parent. Nothing is written when a check fails.
        """
        lookups.check_message(role, text)
        with self._db.transaction(crash_label="store") as conn:
            session = lookups.session(conn, session_id)
            if session.active_leaf_id != expected_head:
                raise HeadMoved(session_id, expected_head, session.active_leaf_id)
            if parent_id is not None:
                try:
                    lookups.message_in(conn, session_id, parent_id)
                except MessageNotFound:
                    raise ParentGone(session_id, parent_id) from None
            message = lookups.insert_message(conn, session, parent_id, role, text, stats, tokens, None)
            conn.execute("UPDATE sessions SET active_leaf_id = ? WHERE id = ?", (message.id, session_id))
            lookups.remember_path(conn, session_id, message.id)
            return message

    def get_message(self, message_id: int) -> Message:
        """One message by id alone. The app reads whole trees (``load_session_tree``); this
        single-row read lets tests check what was stored without going through the tree."""
        with self._db.read() as conn:
            return lookups.message(conn, message_id)

    def messages(self, session_id: int) -> list[Message]:
        with self._db.read() as conn:
            lookups.session(conn, session_id)
            rows = conn.execute(
                f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? ORDER BY id",
                (session_id,),
            )
            return [message_from_row(row) for row in rows]

    def remembered_children(self, session_id: int) -> dict[int | None, int]:
        with self._db.read() as conn:
            rows = conn.execute(
                "SELECT parent_key, child_id FROM remembered_children WHERE session_id = ?",
                (session_id,),
            )
            return {(row[0] or None): row[1] for row in rows}

    def load_tree(self, session_id: int) -> ConversationTree:
        return self.load_session_tree(session_id)[1]

    def load_session_tree(self, session_id: int) -> tuple[Session, ConversationTree]:
        """The session (and so its head) with its tree, read in one read transaction.

        Another process's commit cannot land between the two reads, so the head, when
        set, is always a message of the tree.
        """
        with self._db.snapshot():
            session = self.get_session(session_id)
            tree = ConversationTree(self.messages(session_id), self.remembered_children(session_id))
            return session, tree

    def set_remembered_child(self, session_id: int, parent_id: int | None, child_id: int) -> None:
        with self._db.transaction() as conn:
            lookups.session(conn, session_id)
            lookups.remember(conn, session_id, parent_id, child_id)

    def delete_subtree(self, message_id: int, *, expected_ids: Collection[int] | None = None) -> int:
        """Delete a message and everything below it; returns how many messages went.

        ``expected_ids``, when given, is the set of message ids the user was asked about
        (the subtree as the caller saw it). The subtree is read again inside the write
        transaction, and if it holds other messages (another process added or deleted
        some), nothing is deleted and ``SubtreeChanged`` says how it differs. A head
        inside the subtree moves to the deleted message's parent; remembered children
        that pointed into it are dropped with it.
        """
        with self._db.transaction() as conn:
            top = lookups.message(conn, message_id)
            if expected_ids is not None:
                found = lookups.subtree_ids(conn, message_id)
                if set(found) != set(expected_ids):
                    raise SubtreeChanged(message_id, set(expected_ids), found)
            count = lookups.delete_subtree(conn, top.session_id, message_id, top.parent_id)
            lookups.touch(conn, top.session_id)
            return count

    def delete_subtree_kept(self, message_id: int, *, expected_ids: Collection[int] | None = None) -> Deleted:
        """``delete_subtree``, returning what went so that ``put_back`` can undo it."""
        with self._db.transaction() as conn:
            top = lookups.message(conn, message_id)
            if expected_ids is not None:
                found = lookups.subtree_ids(conn, message_id)
                if set(found) != set(expected_ids):
                    raise SubtreeChanged(message_id, set(expected_ids), found)
            return undo.delete_subtree(conn, top.session_id, message_id, top.parent_id)

    def delete_session_kept(self, session_id: int) -> Deleted:
        """``delete_session``, returning what went so that ``put_back`` can undo it."""
        with self._db.transaction() as conn:
            if not is_id(session_id) or conn.execute(
                    "SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
                raise SessionNotFound(session_id)
            return undo.delete_session(conn, session_id)

    def put_back(self, deleted: Deleted) -> bool:
        """Undo a deletion made by this store (``NothingToUndo`` when what it hung from is
        gone too; then nothing changes); whether the chat's head came back with it."""
        with self._db.transaction() as conn:
            return undo.put_back(conn, deleted)

    # -- search ----------------------------------------------------------------------

    def search(self, query: str, limit: int = 50) -> list[SearchHit]:
        with self._db.read() as conn:
            return search_queries.search(conn, query, limit)
