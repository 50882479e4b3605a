"""What the screen reads about the open chat besides its tree: the context meter and the
saved-state marks. Both are computed from the tokens frozen for the loaded model; the
meter reads the conversation under the controller's tree lock, the marks a copy of the
tree, so the engine is asked about them with no lock held. Both are for
show: when the store cannot be read now (its file was replaced, another program holds
it) they say "not known" rather than fail, and the gestures that write say why."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from sessions.checkpoints import Tier
from sessions.conversation import Conversation
from sessions.saved_marks import checkpoint_tiers as tiers_of
from sessions.store import SessionStore, StoreError
from sessions.tree import ConversationTree

if TYPE_CHECKING:
    from sessions.engine.protocol import ChatEngine


def context_used(conversation: Conversation, store: SessionStore, engine: ChatEngine) -> int | None:
    """Tokens of the active branch for ``engine``'s model (None if not all known yet)."""
    path = conversation.active_path()
    try:
        known = store.session_tokens(conversation.session_id) if conversation.session_id is not None else {}
    except StoreError:
        return None
    counts = [known.get(message.id, {}).get(engine.info.fingerprint) for message in path]
    return None if any(tokens is None for tokens in counts) else sum(len(t or ()) for t in counts)


def checkpoint_tiers(session_id: int | None, tree: ConversationTree, store: SessionStore, engine: ChatEngine,
                     wanted: Collection[int] | None) -> dict[int, Tier | None]:
    """Where the state at the end of each message of ``wanted`` (all: None) is kept for
    ``engine``'s model: ``"ram"``, ``"disk"``, or None; every one None when the store
    cannot give the chat's tokens now. ``tree`` is a copy: no lock is held meanwhile."""
    asked = tree.ids() if wanted is None else [message_id for message_id in wanted if message_id in tree]
    if session_id is None:
        return dict.fromkeys(asked)
    try:
        known = store.session_tokens(session_id)
    except StoreError:
        return dict.fromkeys(asked)
    return tiers_of(tree, known, engine, asked)
