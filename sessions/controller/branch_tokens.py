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

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from sessions.engine.protocol import ChatEngine
from sessions.store import SessionStore
from sessions.templates.chat_template import ChatMessage, TemplateStopped
from sessions.templates.message_tokens import freeze_message_tokens
from sessions.templates.sandbox import stop_requested
from sessions.tree import SAMPLED_BY_UNKNOWN, Message


@dataclass(frozen=True)
class BranchTokens:
    """A branch as the engine takes it: its tokens, where each message ends, and which
    messages are replayed one token at a time (``branch_tokens``)."""

    tokens: list[int]
    ends: list[int]
    stepped: list[bool]


Known = Callable[[Message], "list[int] | None"]
BATCH = 500
"""Messages whose computed tokens are stored in one transaction."""


def _unknown(_message: Message) -> list[int] | None:
    return None


def freeze_branch(engine: ChatEngine, path: Sequence[Message],
                  known: Known = _unknown) -> Iterator[tuple[Message, list[int], bool]]:
    """``(message, tokens, computed)`` for each message of ``path``, root first.

    ``known`` gives a message's tokens already frozen for this model (None: compute them
    now, as the part of the template's rendering of the branch that belongs to it).
    """
    history: list[ChatMessage] = []
    for message in path:
        chat = ChatMessage(role=message.role, content=message.text)
        frozen = known(message)
        if frozen is None:
            yield message, freeze_message_tokens(engine.template, engine.tokenize, history, chat), True
        else:
            yield message, frozen, False
        history.append(chat)


def new_message_tokens(engine: ChatEngine, history: Sequence[tuple[str, str]], role: str,
                       text: str) -> dict[str, list[int]]:
    """The tokens a new message under ``history`` ((role, text) of the branch above it,
    root first) will have for this model: what ``freeze_branch`` computes for it later,
    so that they can be stored with the message itself."""
    before = [ChatMessage(role=r, content=t) for r, t in history]
    chat = ChatMessage(role=role, content=text)
    return {engine.info.fingerprint: freeze_message_tokens(engine.template, engine.tokenize, before, chat)}


def freeze_all(engine: ChatEngine, messages: Sequence[Message]) -> list[list[int]]:
    """Each message's tokens when ``messages`` are a whole branch, all computed afresh."""
    return [tokens for _, tokens, _ in freeze_branch(engine, messages)]


def branch_tokens(store: SessionStore, engine: ChatEngine, path: Sequence[Message],
                  should_stop: Callable[[], bool] = stop_requested) -> tuple[list[int], list[int], list[bool]]:
    """Return (tokens, message end positions, stepped) for ``path`` (root first).

    ``stepped[i]`` is true for a reply this model generated alone (not in a batch of
    versions): its tokens were first decoded one at a time, and replaying them the same way is what keeps a from-scratch
    rebuild bit-identical to the state the conversation had.

    Tokens computed here are stored ``BATCH`` messages to a transaction: one each made a
    5,000-message imported chat take 20 s of commits. ``should_stop`` (default: the job's
    stop, which a quit sets) is looked at between messages: the lists computed so far
    are stored, whole, and ``TemplateStopped`` says the rest is left for the next use.
    """
    fingerprint = engine.info.fingerprint
    n_vocab = getattr(engine.info, "n_vocab", None)
    stored = store.session_tokens(path[0].session_id) if path else {}

    def known(message: Message) -> list[int] | None:
        frozen = stored.get(message.id, {}).get(fingerprint)
        if frozen and n_vocab and not 0 <= min(frozen) <= max(frozen) < n_vocab:
            return None
        return frozen

    tokens: list[int] = []
    ends: list[int] = []
    stepped: list[bool] = []
    pending: list[tuple[int, list[int]]] = []
    try:
        for message, frozen, computed in freeze_branch(engine, path, known):
            if computed:
                pending.append((message.id, frozen))
                if len(pending) >= BATCH:
                    store.set_tokens_many(fingerprint, pending)
                    pending = []
            tokens.extend(frozen)
            ends.append(len(tokens))
            stepped.append(not computed and _sampled_by(message, fingerprint))
            if should_stop() and len(ends) < len(path):
                raise TemplateStopped("was stopped before the branch's tokens were all computed")
    except TemplateStopped:
        if pending:
            store.set_tokens_many(fingerprint, pending)  # what was computed is kept for the next use
        raise
    if pending:
        store.set_tokens_many(fingerprint, pending)
    return tokens, ends, stepped


def _sampled_by(message: Message, fingerprint: str) -> bool:
    """Whether ``message``'s stored tokens for this model are the ones it sampled.

    Tokens rendered for a reply of another model (or an imported one) are stored too, the
    first time its branch is used, and decoded in batches then; they must not be taken for
    sampled ones on the next use. Nor are the tokens of a version sampled in a batch with
    others (``GenerationStats.batch``): they were never decoded alone. A reply stored
    before its model was recorded is taken as sampled by the model its tokens were first
    stored for, as it always was.
    """
    stats = message.stats
    if message.role != "assistant" or stats is None or stats.batch:
        return False
    return stats.sampled_by in (fingerprint, SAMPLED_BY_UNKNOWN)
