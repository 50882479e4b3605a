"""The open chat and the loaded model, and the tree lock that guards the chat.

The session controller holds one ``OpenChat``: every gesture and job reaches the chat
and the model through it, and the branch the engine takes is read here (its messages
under the tree lock, its tokens without it).
"""

from __future__ import annotations

import threading

from sessions.controller.branch_tokens import BranchTokens, branch_tokens
from sessions.controller.conversation import Conversation
from sessions.controller.engine_users import EngineUsers
from sessions.engine.protocol import ChatEngine
from sessions.errors import ControllerError, GenerationCancelled
from sessions.store import SessionStore
from sessions.templates.chat_template import TemplateStopped
from sessions.tree import Message


class OpenChat:
    """The chat open now (if any), the model loaded now (if any), and the tree lock."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self.lock = threading.RLock()
        """The tree lock (re-entrant): every change of the tree and the head, and the store
        writes that go with it; never held while llama.cpp runs."""
        self.conversation: Conversation | None = None
        self.users = EngineUsers()
        """The loaded model, lent to quick reads outside jobs (``engine_users``)."""

    @property
    def engine(self) -> ChatEngine | None:
        """The model loaded now (None: none, or another one loads)."""
        return self.users.engine

    @engine.setter
    def engine(self, engine: ChatEngine | None) -> None:
        self.users.engine = engine

    def conv(self) -> Conversation:
        if self.conversation is None:
            raise ControllerError("no session is open")
        return self.conversation

    def loaded(self) -> ChatEngine:
        if self.engine is None:
            raise ControllerError("no model is loaded")
        return self.engine

    def saved_id(self) -> int:
        session_id = self.conv().session_id
        if session_id is None:
            raise ControllerError("this chat is saved with its first message: there is nothing to keep yet")
        return session_id

    def path(self, leaf_id: int | None) -> list[Message]:
        """The messages of the branch ending at ``leaf_id`` (default: the head), root first; hold the tree lock."""
        conversation = self.conv()
        if leaf_id is None:
            head = conversation.head
            leaf_id = head.id if head is not None else None
        return conversation.tree.path_to(leaf_id) if leaf_id is not None else []

    def branch(self, engine: ChatEngine, leaf_id: int | None) -> BranchTokens:
        """The tokens of the branch ending at ``leaf_id`` (default: the head); call it without the tree lock.

        The lock is held only to read the branch's messages (see ``tokens``).
        """
        with self.lock:
            path = self.path(leaf_id)
        return self.tokens(engine, path)

    def tokens(self, engine: ChatEngine, path: list[Message]) -> BranchTokens:
        """The tokens of ``path``, read by ``path``; call it without the tree lock.

        Messages with no tokens for this model yet (an imported chat) are rendered and
        tokenized here, which takes long for a large chat: holding the tree lock meanwhile
        would keep the UI's reads and gestures waiting. Messages are immutable and their
        frozen tokens per model deterministic, so these are the tokens of the branch that
        was read, even if the tree has changed since (the store locks on its own).

        A stop while the template renders (it runs long) is a reply stopped before it began.
        """
        try:
            return BranchTokens(*branch_tokens(self.store, engine, path))
        except TemplateStopped:
            raise GenerationCancelled("stopped before the reply started") from None
