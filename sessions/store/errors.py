"""Errors raised by the session store, in plain words.

Every failure a user can meet (a damaged file, a database from a newer llamachat, an id
that no longer exists, a disk that is full, another program holding the file) gets its own
class, so the UI can show the message as it is and callers can tell "missing" apart from
"busy" or "broken" without parsing text.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from sessions.errors import LlamachatError


class StoreError(LlamachatError):
    """The session database cannot do what was asked; the message says why."""


class SessionNotFound(StoreError):
    def __init__(self, session_id: int) -> None:
        super().__init__(f"no session {session_id}")
        self.session_id = session_id


class MessageNotFound(StoreError):
    def __init__(self, message_id: int) -> None:
        super().__init__(f"no message {message_id}")
        self.message_id = message_id


class InvalidValue(StoreError):
    """A value that the database must never hold (a lone surrogate, a NaN time)."""


# -- the file and the other programs using it --------------------------------------------


class DatabaseDamaged(StoreError):
    """A refusal that a backup may cure: the file is damaged or is not a database."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class DatabaseBusy(StoreError):
    """Another program held the database longer than the store waits for it."""

    def __init__(self, path: Path, detail: str, *, saving: bool = False) -> None:
        outcome = "nothing was saved; try again when it is done" if saving else "try again when it is done"
        super().__init__(f"busy: another program holds the session database {path} ({detail}); {outcome}.")


class DatabaseReadOnly(StoreError):
    """The database could only be opened for reading: chats show, nothing new is saved."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"the session database {path} is read-only ({reason}): your chats can be "
                         "read, but nothing new can be saved.")
        self.reason = reason


class DatabaseFull(StoreError):
    """The disk holding the database is full; what was asked was not saved."""

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(f"the disk holding the session database {path} is full ({detail}); nothing "
                         "was saved and nothing was lost: free some space and try again.")
        self.path = path
        self.detail = detail


class DatabaseReplaced(StoreError):
    """The file this process opened is no longer the one at the database's path."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"the session database {path} was replaced or moved by another program while "
                         "llamachat had it open; nothing more is written to the old file. Close "
                         "llamachat and start it again to use the database now at that path.")


class DatabaseInUse(StoreError):
    """The database is damaged but another llamachat has it open, so it cannot be repaired now."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"the session database {path} is damaged ({reason}), and another llamachat "
                         "has it open, so it cannot be restored from its backup now. Close the other "
                         "llamachat windows and commands, then start again; the file was left untouched.")


# -- the chat changed under the caller ---------------------------------------------------


class ChatChanged(StoreError):
    """Another window or command changed the chat since the caller read it; reload and retry.

    Raised, with nothing written, by the store methods that take what the caller saw
    (``append_message``'s ``expected_head``, ``delete_subtree``'s ``expected_ids``).
    """


class HeadMoved(ChatChanged):
    def __init__(self, session_id: int, expected: int | None, found: int | None) -> None:
        def name(head: int | None) -> str:
            return "empty" if head is None else f"at message {head}"

        super().__init__(f"the chat changed in another window: session {session_id} is now "
                         f"{name(found)}, not {name(expected)}; nothing was saved, reload it and try again")
        self.session_id, self.expected, self.found = session_id, expected, found


class ParentGone(ChatChanged):
    def __init__(self, session_id: int, parent_id: int) -> None:
        super().__init__(f"the chat changed in another window: message {parent_id} of session "
                         f"{session_id} was deleted; nothing was saved")
        self.session_id, self.parent_id = session_id, parent_id


class SubtreeChanged(ChatChanged):
    def __init__(self, message_id: int, expected: Collection[int], found: Collection[int]) -> None:
        added, gone = len(set(found) - set(expected)), len(set(expected) - set(found))
        changes = [f"{added} message(s) added" if added else "", f"{gone} removed" if gone else ""]
        super().__init__(f"the chat changed in another window: the branch below message {message_id} "
                         f"now holds {len(found)} message(s), not {len(expected)} "
                         f"({', '.join(c for c in changes if c)}); nothing was deleted, look again and retry")
        self.message_id = message_id
        self.expected, self.found = frozenset(expected), frozenset(found)


class NothingToUndo(StoreError):
    """A deletion that cannot be put back: what it hung from is gone too."""
