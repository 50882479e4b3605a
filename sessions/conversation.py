"""One open session: the tree in memory, kept in step with the store.

The UI thinks in gestures (send, regenerate, edit, page to the next sibling, rewind,
delete a branch); this class turns each into tree operations and commits them before
returning, so what is on screen is always what is on disk. The head is the message the
next reply continues from: usually a leaf, but after a rewind it can sit inside the tree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

from sessions.store import Session, SessionStore
from sessions.tree import ConversationTree, GenerationStats, Message, Role, TreeError

_HEAD: object = object()
"""Default ``parent_id`` for ``append``: continue from the head."""


class Conversation:
    """A session's tree plus its head, with every change persisted as it happens."""

    def __init__(self, store: SessionStore, session_id: int) -> None:
        self._store = store
        self.session_id = session_id
        self._tree = store.load_tree(session_id)
        head = store.get_session(session_id).active_leaf_id
        if head is None and len(self._tree):
            head = self._tree.resume_leaf(None).id
        self._head_id: int | None = head

    @property
    def tree(self) -> ConversationTree:
        return self._tree

    @property
    def session(self) -> Session:
        """A fresh copy from the store (title and settings may change elsewhere)."""
        return self._store.get_session(self.session_id)

    @property
    def head(self) -> Message | None:
        return None if self._head_id is None else self._tree.get(self._head_id)

    def active_path(self) -> list[Message]:
        return [] if self._head_id is None else self._tree.path_to(self._head_id)

    # -- growing the tree ------------------------------------------------------------

    def append(
        self,
        role: Role,
        text: str,
        *,
        parent_id: int | None | object = _HEAD,
        stats: GenerationStats | None = None,
        tokens: Mapping[str, Sequence[int]] | None = None,
    ) -> Message:
        """Add a message (under the head unless told otherwise); it becomes the head."""
        parent = self._head_id if parent_id is _HEAD else cast("int | None", parent_id)
        if parent is not None and parent not in self._tree:
            raise TreeError(f"no message {parent} in this conversation")
        message = self._store.add_message(
            self.session_id, parent, role, text, stats=stats, tokens=tokens
        )
        self._tree.add(message)
        self._move_head(message.id)
        return message

    def edit(self, message_id: int, text: str) -> Message:
        """A new sibling with the same parent and role; the original stays."""
        original = self._tree.get(message_id)
        return self.append(original.role, text, parent_id=original.parent_id)

    # -- moving around ---------------------------------------------------------------

    def select(self, message_id: int) -> Message:
        """Show the branch last seen under ``message_id``; returns the new head."""
        leaf = self._tree.resume_leaf(message_id)
        self._move_head(leaf.id)
        return leaf

    def sibling(self, message_id: int, delta: int) -> Message:
        """The sibling ``delta`` steps away (clamped at the ends); its branch is selected."""
        group = self._tree.siblings(message_id)
        index = group.index(self._tree.get(message_id)) + delta
        target = group[max(0, min(len(group) - 1, index))]
        self.select(target.id)
        return target

    def rewind(self, message_id: int) -> Message:
        """Move the head back to ``message_id``; nothing is deleted."""
        self._tree.get(message_id)
        self._move_head(message_id)
        return self._tree.get(message_id)

    def delete_subtree(self, message_id: int) -> int:
        """Delete a message and its descendants; returns how many were removed.

        A head inside the deleted part moves to the parent's remembered branch (or the
        parent itself when nothing is left under it).
        """
        top = self._tree.get(message_id)
        head_removed = self._head_id is not None and (
            self._head_id == message_id
            or any(m.id == message_id for m in self._tree.path_to(self._head_id))
        )
        count = self._store.delete_subtree(message_id)
        self._tree.remove_subtree(message_id)
        if head_removed:
            if top.parent_id is not None:
                self._move_head(self._tree.resume_leaf(top.parent_id).id)
            elif len(self._tree):
                self._move_head(self._tree.resume_leaf(None).id)
            else:
                self._head_id = None
                self._store.set_active_leaf(self.session_id, None)
        return count

    def _move_head(self, message_id: int) -> None:
        changed = self._tree.remember_path(message_id)
        try:
            self._store.set_active_leaf(self.session_id, message_id, remember=changed)
        except Exception:
            self._tree = self._store.load_tree(self.session_id)  # back to what is on disk
            raise
        self._head_id = message_id
