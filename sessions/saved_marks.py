"""Where each message's state is saved: the marks in the tree panel.

Walks the tree once, hashing each branch's tokens as it goes (forks copy the running
hash), so the cost is the token count of the branches walked, not the sum of their
lengths; only the branches that lead to a message asked about are walked. The engine is
asked about every prefix in one call (an engine in another process answers it in one
round trip), and it answers from its checkpoint index without reading a file.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from sessions.checkpoints import PrefixHasher, Tier
from sessions.tree import ConversationTree

if TYPE_CHECKING:
    from sessions.engine.protocol import ChatEngine


def checkpoint_tiers(tree: ConversationTree, frozen: dict[int, dict[str, list[int]]], engine: ChatEngine,
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
