"""The exact token sequence of a branch, from its messages' frozen tokens.

Each message's tokens for a given model are computed once (by the chat template, or kept
as sampled for a generated reply) and stored with the message. A branch is the
concatenation of its messages' tokens, so re-rendering a template that rewrites history
can never change tokens the model has already seen. Messages that have no tokens for
this model yet (an imported chat, or one made with another model) get them computed here,
root first, and stored.
"""

from __future__ import annotations

from typing import Sequence

from sessions.engine.chat_template import ChatMessage
from sessions.engine.message_tokens import freeze_message_tokens
from sessions.tree import Message


def branch_tokens(store, engine, path: Sequence[Message]) -> tuple[list[int], list[int]]:
    """Return (tokens, message end positions) for ``path`` (root first)."""
    fingerprint = engine.info.fingerprint
    known = store.session_tokens(path[0].session_id) if path else {}
    tokens: list[int] = []
    ends: list[int] = []
    history: list[ChatMessage] = []
    for message in path:
        frozen = known.get(message.id, {}).get(fingerprint)
        chat = ChatMessage(role=message.role, content=message.text)
        if frozen is None:
            frozen = freeze_message_tokens(engine.template, engine.tokenize, history, chat)
            store.set_tokens(message.id, fingerprint, frozen)
        tokens.extend(frozen)
        ends.append(len(tokens))
        history.append(chat)
    return tokens, ends
