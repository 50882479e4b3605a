"""One open session: the tree in memory, kept in step with the store.

The UI thinks in gestures (send, regenerate, edit, page to the next sibling, rewind,
delete a branch); this class turns each into tree operations and commits them before
returning, so what is on screen is always what is on disk. The head is the message the
next reply continues from: usually a leaf, but after a rewind it can sit inside the tree.

A new chat is a *draft* until its first message: nothing is written for it, so opening
the app, starting a chat and leaving it unused leaves no empty session behind. The first
``append`` creates the session (with the draft's settings and system prompt) and the
message together, in one transaction.

Another llamachat (a second window, ``llamachat ask``) may change the same session at
any time, so every change is made against what this object shows: a message goes in
only if the session's head is still the one shown (``SessionStore.append_message``), a
branch is deleted only if it still holds the messages counted. When the chat changed
elsewhere the store refuses with ``ChatChanged`` and writes nothing; this object then
reads the session again (tree and head in one read) and passes the refusal on, so the
next look at it shows the chat as it is now.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import cast

from sessions.errors import ControllerError
from sessions.sampling import SamplingSettings
from sessions.store import (
    ChatChanged,
    Deleted,
    MessageNotFound,
    Session,
    SessionNotFound,
    SessionStore,
    StoreError,
)
from sessions.tree import ConversationTree, GenerationStats, Message, Role, TreeError
from sessions.turns import place_user_message, waiting_twin

_HEAD: object = object()
Freeze = Callable[[list[tuple[str, str]], str, str], "Mapping[str, Sequence[int]] | None"]
"""(the branch above as (role, text) pairs, role, text) -> the new message's tokens per model."""
"""Default ``parent_id`` for ``append``: continue from the head."""


@dataclass(frozen=True)
class SessionDraft:
    """The settings of a chat not saved yet: they become the session's at its first message."""

    system_prompt: str | None = None
    """Put as the first message of the chat, before the user's."""
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    model_path: str | None = None
    model_fingerprint: str | None = None
    served: bool = False
    """A chat ``llamachat serve`` keeps (``Session.served``)."""


class Conversation:
    """A session's tree plus its head, with every change persisted as it happens."""

    def __init__(self, store: SessionStore, session_id: int | None, *, draft: SessionDraft | None = None) -> None:
        """Open session ``session_id``, or with None a draft (see the module docstring)."""
        self._store = store
        self.session_id = session_id
        self.draft = (draft or SessionDraft()) if session_id is None else None
        """The settings of a chat not saved yet (None once it is saved)."""
        self._tree = ConversationTree()
        self._head_id: int | None = None
        self._session: Session | None = None
        self.last_deleted: Deleted | None = None
        """What the latest ``delete_subtree`` removed (for an undo)."""
        if session_id is not None:
            self._load(session_id)

    def _load(self, session_id: int) -> None:
        """Read the tree and the head in one read (another process may be writing)."""
        session, tree = self._store.load_session_tree(session_id)
        self._session = session
        head = session.active_leaf_id
        if head is None and len(tree):
            head = tree.resume_leaf(None).id
        self._tree, self._head_id = tree, head

    def reload(self) -> None:
        """Show the session as it is on disk now (another window or command changed it).

        A session deleted elsewhere leaves a new, empty chat in its place.
        """
        if self.session_id is None:
            return
        try:
            self._load(self.session_id)
        except SessionNotFound:
            self.session_id, self.draft = None, SessionDraft()
            self._tree, self._head_id = ConversationTree(), None

    @contextmanager
    def _as_shown(self) -> Iterator[None]:
        """Run a change made on what this object shows; if the chat changed elsewhere,
        read it again and pass the refusal on."""
        try:
            yield
        except ChatChanged:
            self.reload()
            raise
        except (MessageNotFound, SessionNotFound) as error:
            self.reload()
            raise ChatChanged(f"the chat changed in another window: {error} any more; nothing was "
                              "changed, look again and retry") from None

    @property
    def tree(self) -> ConversationTree:
        return self._tree

    @property
    def session(self) -> Session | None:
        """A fresh copy from the store (title and settings may change elsewhere); None for a draft.

        When the store cannot be read now (its file was replaced, another program holds
        it), the copy last read: showing the chat must not fail, and every change says
        why it cannot be made.
        """
        if self.session_id is None:
            return None
        try:
            self._session = self._store.get_session(self.session_id)
        except StoreError:
            if self._session is None or self._session.id != self.session_id:
                raise
        return self._session

    @property
    def _saved_id(self) -> int:
        if self.session_id is None:
            raise TreeError("this chat has no messages yet")
        return self.session_id

    @property
    def head(self) -> Message | None:
        return None if self._head_id is None else self._tree.get(self._head_id)

    def active_path(self) -> list[Message]:
        return [] if self._head_id is None else self._tree.path_to(self._head_id)

    def record_model(self, path: str, fingerprint: str) -> None:
        """Remember the model the chat goes on with (reopening the chat loads it again)."""
        if self.draft is not None:
            self.draft = replace(self.draft, model_path=path, model_fingerprint=fingerprint)
        else:
            self._store.update_session(self._saved_id, model_path=path, model_fingerprint=fingerprint)

    # -- growing the tree ------------------------------------------------------------

    def append(
        self,
        role: Role,
        text: str,
        *,
        parent_id: int | None | object = _HEAD,
        expected_head: int | None | object = _HEAD,
        stats: GenerationStats | None = None,
        tokens: Mapping[str, Sequence[int]] | None = None,
    ) -> Message:
        """Add a message (under the head unless told otherwise); it becomes the head.

        ``expected_head`` (default: the head shown) is the head the gesture was made on:
        if the session's head is another one by now, nothing is written (``ChatChanged``).
        The first message of a draft saves the session first, with the draft's system
        prompt as its first message (the new message then goes under it).
        """
        parent = self._head_id if parent_id is _HEAD else cast("int | None", parent_id)
        expected = self._head_id if expected_head is _HEAD else cast("int | None", expected_head)
        if parent is not None and parent not in self._tree:
            raise TreeError(f"no message {parent} in this conversation")
        if self.session_id is None:
            return self._save_with(role, text, stats, tokens)
        with self._as_shown():
            message = self._store.append_message(self._saved_id, parent, role, text, expected_head=expected,
                                                 stats=stats, tokens=tokens)
        self._tree.add(message)
        self._tree.remember_path(message.id)  # the store remembered it too
        self._head_id = message.id
        return message

    def _save_with(self, role: Role, text: str, stats: GenerationStats | None,
                   tokens: Mapping[str, Sequence[int]] | None) -> Message:
        """Save the draft and its first message, all or nothing."""
        draft = self.draft or SessionDraft()
        with self._store.transaction():
            session = self._store.create_session(
                model_path=draft.model_path, model_fingerprint=draft.model_fingerprint,
                system_prompt=draft.system_prompt, sampling=draft.sampling, served=draft.served)
            added = []
            if draft.system_prompt and role != "system":
                added.append(self._store.add_message(session.id, None, "system", draft.system_prompt))
            parent = added[-1].id if added else None
            added.append(self._store.add_message(session.id, parent, role, text, stats=stats, tokens=tokens))
            tree = ConversationTree(added)
            tree.remember_path(added[-1].id)
            self._store.set_active_leaf(session.id, added[-1].id, remember=tree.remembered())
        self.session_id, self.draft, self._tree, self._head_id = session.id, None, tree, added[-1].id
        self._session = session  # the copy ``session`` falls back on, should the store fail before it is read
        return added[-1]

    def add_user_message(self, text: str, parent_id: int | None = None, *, join: bool = True,
                         freeze: Freeze | None = None) -> Message:
        """Add a message of the user at the head (or under ``parent_id``), keeping roles alternating.

        See ``sessions.turns``: at a message of the user the text is joined to it as a new
        version (beside it with ``join=False``), and the same text again moves the head
        back to it and adds nothing. ``freeze`` gives the message's tokens from the
        branch above it (role and text of each message, root first), stored with the
        message in its one transaction.
        """
        head = self.head
        parent = parent_id if parent_id is not None else (head.id if head else None)
        if parent is None and self.session_id is not None:
            parent = self._system_root()
        placed = place_user_message(self._tree, parent, text, join=join)
        if placed.again is not None:
            return self.rewind(placed.again.id)
        tokens = freeze(self._history(placed.parent_id), "user", placed.text) if freeze is not None else None
        return self.append("user", placed.text, parent_id=placed.parent_id, tokens=tokens)

    def _history(self, parent_id: int | None) -> list[tuple[str, str]]:
        """(role, text) of the messages a new one under ``parent_id`` follows, root first;
        for a draft, the system prompt it is saved with."""
        if self.session_id is None:
            prompt = (self.draft or SessionDraft()).system_prompt
            return [("system", prompt)] if prompt else []
        return [(m.role, m.text) for m in self._tree.path_to(parent_id)] if parent_id is not None else []

    def _system_root(self) -> int | None:
        """Where a message sent at the top of a saved chat goes: under the chat's system prompt.

        The head sits above the roots only when the chat was emptied (every message
        deleted) or its system prompt removed (then there is none). The settings still
        show the chat's prompt, so the branch starts with it, stored now, as the first
        message of a new chat is stored under its prompt.
        """
        session = self.session
        prompt = session.system_prompt if session is not None else None
        if prompt is None or not prompt.strip():
            return None
        kept = next((m for m in self._tree.roots() if m.role == "system" and m.text == prompt), None)
        return kept.id if kept is not None else self.append("system", prompt, parent_id=None).id

    def rewind_to_question(self, message_id: int) -> Message:
        """Move the head to the user message a reply answers (or to this user message)."""
        message = self._tree.get(message_id)
        question = self._tree.parent(message_id) if message.role == "assistant" else message
        if question is None or question.role != "user":
            raise ControllerError("only a reply, or a message of yours, can be answered again")
        return self.rewind(question.id)

    def edit(self, message_id: int, text: str, *, freeze: Freeze | None = None) -> Message:
        """A new sibling with the same parent and role; the original stays.

        A message of the user edited into the text of a version still waiting for its
        answer is that version (``sessions.turns``). ``freeze``: as ``add_user_message``.
        """
        original = self._tree.get(message_id)
        if original.role == "user":
            twin = waiting_twin(self._tree, original.parent_id, text)
            if twin is not None:
                return self.rewind(twin.id)
        tokens = (freeze(self._history(original.parent_id), original.role, text)
                  if freeze is not None and original.role == "user" else None)
        return self.append(original.role, text, parent_id=original.parent_id, tokens=tokens)

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

    def leave_branch(self) -> None:
        """Put the head above the roots: the next message starts a new branch of its own."""
        self._store.set_active_leaf(self._saved_id, None)
        self._head_id = None

    def delete_subtree(self, message_id: int, *, expected_ids: Collection[int] | None = None) -> int:
        """Delete a message and its descendants; returns how many were removed.

        ``expected_ids`` (default: the branch as shown) are the messages the user was
        asked about: if the branch holds others by now, nothing is deleted
        (``ChatChanged``). A head inside the deleted part moves to the parent's
        remembered branch (or the parent itself when nothing is left under it).
        """
        top = self._tree.get(message_id)
        if expected_ids is None:
            expected_ids = [message_id, *(m.id for m in self._tree.descendants(message_id))]
        head_removed = self._head_id is not None and (
            self._head_id == message_id
            or any(m.id == message_id for m in self._tree.path_to(self._head_id))
        )
        with self._as_shown():
            self.last_deleted = self._store.delete_subtree_kept(message_id, expected_ids=expected_ids)
            count = self.last_deleted.count
        self._tree.remove_subtree(message_id)
        if head_removed:
            if top.parent_id is not None:
                self._move_head(self._tree.resume_leaf(top.parent_id).id)
            elif len(self._tree):
                self._move_head(self._tree.resume_leaf(None).id)
            else:
                self._head_id = None
                self._store.set_active_leaf(self._saved_id, None)
            # Where the gesture left the head: undoing moves it back only from there.
            self.last_deleted = replace(self.last_deleted, left_at=self._head_id)
        return count

    def _move_head(self, message_id: int) -> None:
        changed = self._tree.remember_path(message_id)
        try:
            with self._as_shown():
                self._store.set_active_leaf(self._saved_id, message_id, remember=changed)
        except ChatChanged:
            raise  # read again already
        except Exception:
            self.reload()  # back to what is on disk
            raise
        self._head_id = message_id
