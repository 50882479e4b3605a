"""The exact token sequence of a branch, from its messages' frozen tokens.

Each message's tokens for a given model are computed once (by the chat template, or kept
as sampled for a generated reply) and stored with the message. A branch is the
concatenation of its messages' tokens, so re-rendering a template that rewrites history
can never change tokens the model has already seen. Messages that have no tokens for
this model yet (an imported chat, or one made with another model) get them computed here,
root first, and stored. Stored ids outside this model's vocabulary (which only a damaged
or forged database could hold) are treated as missing: llama.cpp would fail on them for
good, and they cannot be the tokens of the text anyway.
"""

from __future__ import annotations

from collections.abc import Sequence

from sessions.engine.chat_template import ChatMessage
from sessions.engine.message_tokens import freeze_message_tokens
from sessions.tree import Message


def branch_tokens(store, engine, path: Sequence[Message]) -> tuple[list[int], list[int], list[bool]]:
    """Return (tokens, message end positions, stepped) for ``path`` (root first).

    ``stepped[i]`` is true for a reply this model generated: its tokens were first
    decoded one at a time, and replaying them the same way is what keeps a from-scratch
    rebuild bit-identical to the state the conversation had.
    """
    fingerprint = engine.info.fingerprint
    n_vocab = getattr(engine.info, "n_vocab", None)
    known = store.session_tokens(path[0].session_id) if path else {}
    tokens: list[int] = []
    ends: list[int] = []
    stepped: list[bool] = []
    history: list[ChatMessage] = []
    for message in path:
        frozen = known.get(message.id, {}).get(fingerprint)
        if frozen and n_vocab and not 0 <= min(frozen) <= max(frozen) < n_vocab:
            frozen = None
        chat = ChatMessage(role=message.role, content=message.text)
        generated = frozen is not None and message.role == "assistant" and message.stats is not None
        if frozen is None:
            frozen = freeze_message_tokens(engine.template, engine.tokenize, history, chat)
            store.set_tokens(message.id, fingerprint, frozen)
        tokens.extend(frozen)
        ends.append(len(tokens))
        stepped.append(generated)
        history.append(chat)
    return tokens, ends, stepped
