"""The saved sessions as a whole, apart from the one that is open: list, search, import.

None of this touches the open chat or the model, so it needs neither of the controller's
locks (the store serialises its own reads and writes) and the dialogs that use it can
run it in their own worker threads. Deleting a session is the controller's, since the
deleted session may be the open one.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sessions.exchange import import_file
from sessions.sampling import SamplingSettings
from sessions.store import SearchHit, SessionStore, SessionSummary

if TYPE_CHECKING:
    from sessions.exchange import Imported


class SessionLibrary:
    """Every saved session of one store."""

    def __init__(self, store: SessionStore, sampling: SamplingSettings | None = None) -> None:
        self._store = store
        self._sampling = sampling
        """What an imported chat whose file names no settings gets: the configured ones."""

    def last_session_id(self) -> int | None:
        """The session with messages changed last: the one a plain start reopens.

        Sessions without a message are passed over (older versions saved one for every
        start, and reopening one of those would hide the last real conversation), and so
        are the chats ``llamachat serve`` keeps: a client's last request is not the
        conversation the user left the app in (they stay in the session list).
        """
        return next((summary.id for summary in self._store.list_sessions()
                     if summary.message_count and not summary.served), None)

    def list_sessions(self) -> list[SessionSummary]:
        """Every saved session, newest first."""
        return self._store.list_sessions()

    def title_of(self, session_id: int) -> str:
        """The session's title as stored now (another window or ``llamachat rename`` may
        have changed it); a read the store cannot make raises ``StoreError``."""
        return self._store.get_session(session_id).title

    def search_sessions(self, query: str) -> list[SearchHit]:
        """Sessions whose title or messages contain the words of ``query``."""
        return self._store.search(query)

    def import_file(self, path: Path) -> Imported:
        """Import the sessions of a llamachat, llama.cpp web UI or ChatGPT export; their ids,
        and the entries that could not be read (``Imported.skipped``).

        Blocking (it reads and checks the whole file): run it in a worker thread.
        """
        return import_file(self._store, path, sampling=self._sampling)
