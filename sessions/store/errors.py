"""Errors raised by the session store, in plain words.

Every failure a user can meet (a damaged file, a database from a newer llamachat, an id
that no longer exists) gets its own class, so the UI can show the message as it is and
callers can tell "missing" apart from "broken" without parsing text.
"""

from __future__ import annotations


class StoreError(Exception):
    """The session database cannot do what was asked; the message says why."""


class SessionNotFound(StoreError):
    def __init__(self, session_id: int) -> None:
        super().__init__(f"no session {session_id}")
        self.session_id = session_id


class MessageNotFound(StoreError):
    def __init__(self, message_id: int) -> None:
        super().__init__(f"no message {message_id}")
        self.message_id = message_id
