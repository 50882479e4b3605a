"""Deletions this run can still take back: a chat, or a message with what follows it.

A deletion commits at once; what it removed is kept here (``sessions.store.undo``) until
the app closes, or for ``keep_seconds`` when that is set, newest last. A deleted chat's
checkpoint files stay as long as its deletion can be undone (their removal would make the
chat it brings back slow to resume), and are removed once it cannot.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from sessions.checkpoints.owners import ChatTokens
from sessions.store import Deleted, NothingToUndo, SessionStore

LIMIT = 100
"""Deletions kept at most (the oldest go first)."""


@dataclass(frozen=True)
class BroughtBack:
    """A deletion undone, and whether the chat shows it again."""

    deleted: Deleted
    shown: bool
    """False when the head was in it but another window went on from where the deletion
    left it: that newer work stays shown, and what came back is a branch beside it."""

    def sentence(self) -> str:
        """What came back, and where, for the user."""
        deleted = self.deleted
        if deleted.kind == "session":
            return "Brought back the chat."
        what = f"{deleted.count} message{'s' if deleted.count != 1 else ''}"
        if self.shown or deleted.head not in deleted.message_ids():
            return f"Brought back {what}."
        where = f"message {deleted.parent_id}" if deleted.parent_id is not None else "the top of the chat"
        return (f"Brought back {what}, as a branch beside the one shown: another window went on in this "
                f"chat since the deletion, and what it added stays shown. They follow {where} "
                f"(message {deleted.target} is the first).")


@dataclass(frozen=True)
class _Kept:
    deleted: Deleted
    chat: ChatTokens | None
    """A deleted chat's tokens, whose checkpoint files go once it cannot come back."""
    at: float


class DeletionUndo:
    """The deletions of this run that can be undone, newest last."""

    def __init__(self, store: SessionStore, remove_files: Callable[[ChatTokens], None],
                 keep_seconds: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._remove_files = remove_files
        self._keep_seconds = keep_seconds
        self._clock = clock
        self._kept: list[_Kept] = []
        self._lock = threading.Lock()

    @property
    def undoable(self) -> bool:
        """Whether a deletion can be brought back at all (``undo_minutes = 0``: never)."""
        return self._keep_seconds is None or self._keep_seconds > 0

    def keep(self, deleted: Deleted, chat: ChatTokens | None = None) -> None:
        """Remember a deletion just made."""
        with self._lock:
            self._kept.append(_Kept(deleted, chat, self._clock()))
            gone = self._expire()
        self._let_go(gone)

    def latest(self) -> Deleted | None:
        """The deletion ``undo`` would take back (None: none)."""
        with self._lock:
            gone = self._expire()
            latest = self._kept[-1].deleted if self._kept else None
        self._let_go(gone)
        return latest

    def undo(self) -> BroughtBack:
        """Put back the newest deletion; ``NothingToUndo`` when there is none, or when what
        it hung from has gone since (then it is dropped, and the next one is offered)."""
        with self._lock:
            gone = self._expire()
            kept = self._kept.pop() if self._kept else None
        self._let_go(gone)
        if kept is None:
            raise NothingToUndo("nothing deleted in this run can be brought back")
        try:
            shown = self._store.put_back(kept.deleted)
        except NothingToUndo:
            self._let_go([kept])
            raise
        return BroughtBack(kept.deleted, shown)

    def close(self) -> None:
        """The run ends: every deletion is final."""
        with self._lock:
            gone, self._kept = self._kept, []
        self._let_go(gone)

    def _expire(self) -> list[_Kept]:
        now = self._clock()
        keep = [k for k in self._kept if self._keep_seconds is None or now - k.at < self._keep_seconds][-LIMIT:]
        staying = {id(k) for k in keep}
        gone = [k for k in self._kept if id(k) not in staying]
        self._kept = keep
        return gone

    def _let_go(self, gone: list[_Kept]) -> None:
        for kept in gone:
            if kept.chat is not None:
                self._remove_files(kept.chat)
