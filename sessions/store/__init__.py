"""Persistent sessions: one private SQLite database with a versioned schema.

Import from here: ``SessionStore`` does the work, the records are frozen snapshots, and
every failure is a ``StoreError`` with a message fit to show the user.
May import only the core's small modules (``tree``, ``sampling``, ``durable``); never the engine.
"""

from sessions.store.errors import (
    ChatChanged,
    DatabaseBusy,
    DatabaseFull,
    DatabaseInUse,
    DatabaseReadOnly,
    DatabaseReplaced,
    HeadMoved,
    InvalidValue,
    MessageNotFound,
    NothingToUndo,
    ParentGone,
    SessionNotFound,
    StoreError,
    SubtreeChanged,
)
from sessions.store.records import NewMessage, SearchHit, Session, SessionSummary, title_from_text
from sessions.store.schema import SCHEMA_VERSION
from sessions.store.session_store import SessionStore
from sessions.store.undo import Deleted

__all__ = [
    "SCHEMA_VERSION",
    "ChatChanged",
    "DatabaseBusy",
    "DatabaseFull",
    "DatabaseInUse",
    "DatabaseReadOnly",
    "DatabaseReplaced",
    "Deleted",
    "HeadMoved",
    "InvalidValue",
    "MessageNotFound",
    "NewMessage",
    "NothingToUndo",
    "ParentGone",
    "SearchHit",
    "Session",
    "SessionNotFound",
    "SessionStore",
    "SessionSummary",
    "StoreError",
    "SubtreeChanged",
    "title_from_text",
]
