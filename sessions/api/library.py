"""The saved chats without a model: the session store, and chats exported and imported.

``llamachat sessions``, ``show``, ``rename``, ``delete``, ``export`` and ``import`` work
on the store alone; the app lists and searches through ``SessionController.library``.
"""

from __future__ import annotations

from sessions.exchange import ExchangeError, ExportKind, Imported, ImportStopped, export_text, import_file, write_export
from sessions.store import (
    DatabaseFull,
    Deleted,
    HeadMoved,
    NothingToUndo,
    SearchHit,
    Session,
    SessionNotFound,
    SessionStore,
    SessionSummary,
    StoreError,
    title_from_text,
)

__all__ = [
    "DatabaseFull",
    "Deleted",
    "ExchangeError",
    "ExportKind",
    "HeadMoved",
    "ImportStopped",
    "Imported",
    "NothingToUndo",
    "SearchHit",
    "Session",
    "SessionNotFound",
    "SessionStore",
    "SessionSummary",
    "StoreError",
    "export_text",
    "import_file",
    "title_from_text",
    "write_export",
]
