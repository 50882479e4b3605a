"""What the screen reads about the open chat besides its tree: the context meter and the
saved-state marks. Both are computed from the tokens frozen for the loaded model; the
meter reads the conversation under the controller's tree lock, the marks a copy of the
tree, so the engine is asked about them with no lock held. Both are for
show: when the store cannot be read now (its file was replaced, another program holds
it) they say "not known" rather than fail, and the gestures that write say why.

The marks walk the tree once, hashing each branch's tokens as it goes (forks copy the
running hash), so the cost is the token count of the branches walked, not the sum of
their lengths; only the branches that lead to a message asked about are walked. The
engine is asked about every prefix in one call (an engine in another process answers it
in one round trip), and it answers from its checkpoint index without reading a file.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from sessions.checkpoints import PrefixHasher
from sessions.controller.conversation import Conversation
from sessions.store import SessionStore, StoreError
from sessions.tree import ConversationTree

if TYPE_CHECKING:
    from sessions.engine.protocol import ChatEngine
    from sessions.engine.reports import Tier


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
    return _tiers_of(tree, known, engine, asked)


def _tiers_of(tree: ConversationTree, frozen: dict[int, dict[str, list[int]]], engine: ChatEngine,
             wanted: Collection[int] | None = None) -> dict[int, Tier | None]:
    """For each message of ``wanted`` in ``tree`` (all of them when None): where the
    engine keeps the state after its last token, ``"ram"``, ``"disk"``, or None.

    ``frozen`` is the store's ``session_tokens``: message id -> model fingerprint ->
    tokens. A message not tokenized for this model (and everything below it) cannot have
    a checkpoint yet, nor can an empty one be told apart from its parent: both are None.
    """
    asked = [message_id for message_id in (wanted if wanted is not None else tree.ids()) if message_id in tree]
    needed: set[int] = set()  # the messages asked about and everything above them
    for message_id in asked:
        current: int | None = message_id
        while current is not None and current not in needed:
            needed.add(current)
            current = tree.get(current).parent_id
    fingerprint, prefixes = engine.info.fingerprint, {}
    stack = [(root.id, PrefixHasher()) for root in tree.roots() if root.id in needed]
    while stack:
        message_id, hasher = stack.pop()
        tokens = frozen.get(message_id, {}).get(fingerprint)
        if tokens is None:
            continue
        hasher = hasher.copy().extend(tokens)
        if tokens:
            prefixes[message_id] = hasher.hexdigest()
        stack.extend((child.id, hasher) for child in tree.children(message_id) if child.id in needed)
    tiers: dict[int, Tier | None] = dict.fromkeys(asked)
    kept = [message_id for message_id in asked if message_id in prefixes]
    if kept:
        tiers.update(zip(kept, engine.saved_tiers([prefixes[i] for i in kept]), strict=True))
    return tiers
