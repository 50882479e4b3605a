"""Which recent turns of a branch fit in the context window, when the whole branch does not.

A conversation that outgrows ``n_ctx`` cannot be answered as it is. Rather than cut the
model's view silently, the controller offers to continue in a *new* branch that keeps the
system prompt, the most recent turns that fit with room for a reply, and the message
waiting for an answer; the old branch stays as it was. The new branch's tokens are
computed here exactly as ``branch_tokens`` would compute them for those messages (a
trimmed conversation starts differently, so no earlier token can be reused), which is
also how the fit is checked: with the real template and tokenizer, not a guess.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sessions.controller.branch_tokens import freeze_all
from sessions.errors import ContextOverflow, ControllerError, LlamachatError
from sessions.tree import Message

if TYPE_CHECKING:
    from sessions.controller.conversation import Conversation
    from sessions.engine.protocol import ChatEngine
    from sessions.store import SessionStore


class BranchTooLong(LlamachatError):
    """Even the message waiting for an answer does not leave room for a reply."""


@dataclass(frozen=True)
class TrimPlan:
    """The messages of the new branch (root first) and their tokens for this model."""

    kept: tuple[Message, ...]
    tokens: tuple[tuple[int, ...], ...]
    dropped: int
    """Messages of the old branch left out."""

    @property
    def total(self) -> int:
        return sum(len(t) for t in self.tokens)


def plan_trim(engine: ChatEngine, path: Sequence[Message], *, n_ctx: int, reserve: int,
              known: Mapping[int, int] | None = None) -> TrimPlan:
    """The longest tail of ``path`` (whole turns, after any system prompt) that fits.

    ``path`` ends with the user message to answer. The tail must fit in ``n_ctx -
    reserve`` tokens. ``known`` (message id to its token count in the old branch, where
    frozen for this model) guesses where to start, and the exact tokens confirm it
    (older turns are dropped one by one until they do). At least the oldest turn is
    dropped when there is one to drop. When only the waiting message is left, it is kept
    as long as a reply can start (the reply then gets less than ``reserve``); when it
    fills the whole context, ``BranchTooLong`` says so in plain words.
    """
    if not path or path[-1].role != "user":
        raise ValueError("a branch to trim ends with the user message to answer")
    system = list(path[:1]) if path[0].role == "system" else []
    body = list(path[len(system):])
    starts = [i for i, message in enumerate(body) if message.role == "user"]
    budget = max(1, n_ctx - reserve)
    candidates = starts[1:] or starts[-1:]  # drop at least the oldest turn when possible
    known = known or {}

    def estimate(message: Message) -> int:
        return known.get(message.id, len(message.text) // 3 + 8)

    guesses = [sum(map(estimate, system)) + sum(map(estimate, body[s:])) for s in candidates]
    at = next((i for i, guess in enumerate(guesses) if guess <= budget), len(candidates) - 1)
    while True:
        kept = system + body[candidates[at]:]
        tokens = freeze_all(engine, kept)
        total = sum(len(t) for t in tokens)
        if total <= budget or at == len(candidates) - 1:
            break
        at += 1
    if total >= n_ctx:
        alone = len(tokens[-1])
        with_system = f" ({total:,} with the system prompt)" if system else ""
        raise BranchTooLong(
            f"this message alone is {alone:,} tokens{with_system}; the context holds {n_ctx:,}: "
            "shorten it, or use a larger context (-c, or n_ctx in config.toml)"
        )
    return TrimPlan(tuple(kept), tuple(tuple(t) for t in tokens), len(path) - len(kept))


def check_trimmable(path: Sequence[Message]) -> None:
    """Refuse a branch that does not end with a user message waiting for an answer."""
    if not path or path[-1].role != "user":
        raise ControllerError("only a branch that ends with a message to answer can be trimmed")


def fit_branch(store: SessionStore, engine: ChatEngine, session_id: int | None, path: Sequence[Message], *,
               reserve: int) -> TrimPlan:
    """``plan_trim`` for ``path`` in the engine's context, guessing from the tokens the
    store keeps for this model. Renders and tokenizes the turns it tries, which takes
    long for a long chat: call it without the tree lock. Raises ``ContextOverflow``
    when the message to answer alone fills the context."""
    fingerprint = engine.info.fingerprint
    known = store.session_tokens(session_id) if session_id is not None else {}
    counts = {mid: len(by_model[fingerprint]) for mid, by_model in known.items() if fingerprint in by_model}
    try:
        return plan_trim(engine, path, n_ctx=engine.n_ctx, reserve=reserve, known=counts)
    except BranchTooLong as error:
        raise ContextOverflow(str(error), n_ctx=engine.n_ctx) from None


def add_trimmed(conv: Conversation, engine: ChatEngine, path: Sequence[Message], plan: TrimPlan) -> Message:
    """Copy the turns ``plan`` keeps below a new root; return the new head.

    The new branch is a new root beside the old one (which stays untouched): the system
    message if any, then the most recent turns that fit, then the message to answer,
    which becomes the head. Returns that message itself when nothing older is left out.
    Called under the tree lock; ``path`` was read under it before (``check_trimmable``),
    and its message to answer must still be there.
    """
    if path[-1].id not in conv.tree:
        raise ControllerError("the message to answer was deleted meanwhile: nothing was trimmed")
    if not plan.dropped:
        return path[-1]  # nothing older to leave out, and it fits as it is
    fingerprint = engine.info.fingerprint
    head: Message | None = None
    for message, tokens in zip(plan.kept, plan.tokens, strict=True):
        head = conv.append(message.role, message.text, parent_id=head.id if head is not None else None,
                           tokens={fingerprint: list(tokens)})
    assert head is not None  # the message to answer is always kept
    return conv.tree.get(head.id)
