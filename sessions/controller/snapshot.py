"""The open chat as it stood at one moment, for showing it.

A worker thread may add a reply to the tree while the UI draws; the UI reads a snapshot
taken under the controller's lock instead of the live tree, so what it draws is always
one consistent state, and nothing it does with the snapshot can change the chat.
"""

from __future__ import annotations

from dataclasses import dataclass

from sessions.store import Session
from sessions.tree import ConversationTree, Message


@dataclass(frozen=True)
class ChatSnapshot:
    session: Session
    tree: ConversationTree
    """A private copy of the whole tree (every branch)."""
    path: tuple[Message, ...]
    """The active branch, root first; it ends at the head."""

    @property
    def session_id(self) -> int:
        return self.session.id

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
