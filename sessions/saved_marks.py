"""Which messages have their state saved: the marks in the tree panel.

Walks the tree once, hashing each branch's tokens as it goes (forks copy the running
hash), so the cost is the tree's token count, not the sum of its branches' lengths.
"""

from __future__ import annotations

from sessions.checkpoints import PrefixHasher


def saved_message_ids(tree, frozen: dict[int, dict[str, list[int]]], engine) -> set[int]:
    """Ids of messages after whose last token the engine has a checkpoint.

    ``frozen`` is the store's ``session_tokens``: message id -> model fingerprint ->
    tokens. A message not tokenized for this model (and everything below it) cannot have
    a checkpoint yet.
    """
    fingerprint, saved = engine.info.fingerprint, set()
    stack = [(root, PrefixHasher()) for root in tree.roots()]
    while stack:
        message, hasher = stack.pop()
        tokens = frozen.get(message.id, {}).get(fingerprint)
        if tokens is None:
            continue
        hasher = hasher.copy().extend(tokens)
        if tokens and engine.is_saved(hasher.hexdigest()):
            saved.add(message.id)
        stack.extend((child, hasher) for child in tree.children(message.id))
    return saved
