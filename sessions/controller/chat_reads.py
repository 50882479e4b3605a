"""What the screen reads about the open chat besides its tree: the context meter and the
saved-state marks. Both are computed from the tokens frozen for the loaded model; the
caller holds the controller's tree lock while they read the conversation. Both are for
show: when the store cannot be read now (its file was replaced, another program holds
it) they say "not known" rather than fail, and the gestures that write say why."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessions.conversation import Conversation
from sessions.saved_marks import saved_message_ids as marks
from sessions.store import SessionStore, StoreError

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


def saved_message_ids(conversation: Conversation, store: SessionStore, engine: ChatEngine) -> set[int]:
    """Messages whose state at their end is checkpointed (RAM or disk) for ``engine``'s model."""
    if conversation.session_id is None:
        return set()
    try:
        known = store.session_tokens(conversation.session_id)
    except StoreError:
        return set()
    return marks(conversation.tree.copy(), known, engine)
