"""The open chat as it stood at one moment, for showing it.

A worker thread may add a reply to the tree while the UI draws; the UI reads a snapshot
taken under the controller's lock instead of the live tree, so what it draws is always
one consistent state, and nothing it does with the snapshot can change the chat.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sessions.controller.chat_settings import ChatSettings
from sessions.sampling import SamplingSettings
from sessions.store import Session
from sessions.tree import ConversationTree, Message


@dataclass(frozen=True)
class ChatSnapshot:
    session: Session | None
    """The saved session; None for a new chat not saved yet (it has no message)."""
    tree: ConversationTree
    """A private copy of the whole tree (every branch)."""
    path: tuple[Message, ...]
    """The active branch, root first; it ends at the head."""
    settings: ChatSettings = field(default_factory=lambda: ChatSettings(None, SamplingSettings()))
    """The system prompt of the branch shown and the chat's sampling settings."""

    @property
    def session_id(self) -> int | None:
        return self.session.id if self.session is not None else None

    @property
    def title(self) -> str:
        return self.session.title if self.session is not None else ""

    @property
    def head(self) -> Message | None:
        """Where the next message goes (None in an empty chat)."""
        return self.path[-1] if self.path else None

    def positions(self) -> dict[int, tuple[int, int]]:
        """``(i, n)`` among its siblings for each message of the branch: ``‹ i/n ›``."""
        return {message.id: self.tree.sibling_index(message.id) for message in self.path}

    def message(self, message_id: int | None) -> Message | None:
        """The message with this id anywhere in the tree, or None."""
        return self.tree.get(message_id) if message_id is not None and message_id in self.tree else None
