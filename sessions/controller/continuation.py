"""Continuing a reply that was cut at its length limit (or stopped), from where it ended;
or one written or edited by hand, from its text; or a reply from a place inside it.

The continuation is stored as a new version of the reply (a sibling holding the old
text followed by the new, and the old tokens followed by the new ones), not as a second
message after it. Two assistant messages in a row are exactly what the templates that
enforce alternating roles refuse, and each message's tokens are the template's rendering
of it, end-of-turn marker included, so a second message would not be what the model
wrote: the model wrote one reply, with no end of turn in the middle. As one message its
tokens stay the tokens the model sampled, one after the other, and rebuilding the branch
replays them the same way (one token at a time), bit for bit. The cut version stays as
the earlier version (``‹ 1/2 ›``).

A reply not sampled alone (written or edited by hand, or a version sampled in a batch)
is decoded as one batch wherever its branch is made live, and its checkpoints, found by
its tokens, hold that state. A version going on from it must be rebuilt the same way, or
the same tokens would stand for two states: so it goes on the batch way (the new tokens
sampled as a batch of one, ``reply.write_reply``'s ``alone``) and is stored as not sampled
alone, then made live as a rebuild makes it (``versions.settle``).

Only the new tokens are evaluated: the engine keeps the logits after a reply that may be
continued (in the live context, and in the checkpoint at the reply's end), so making the
branch that ends at the reply live restores it and decodes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessions.controller.branch_tokens import BranchTokens
from sessions.errors import ContextOverflow, ControllerError, DecodeCancelled, GenerationCancelled
from sessions.memory_kind import MemoryKind
from sessions.stop_reason import StopReason
from sessions.tree import Message

if TYPE_CHECKING:
    from sessions.engine.protocol import ChatEngine
    from sessions.engine.reports import Prepared

CAN_CONTINUE = frozenset({StopReason.LENGTH, StopReason.CANCELLED})
"""Why a reply may have ended for it to be continued."""


def check_continuable(reply: Message) -> None:
    """Refuse, in plain words, a message that cannot be continued.

    A reply with no stats was written or edited by hand (or imported): it goes on from its
    text (``goes_on_alone``)."""
    if reply.role != "assistant":
        raise ControllerError("only a reply can be continued")
    if reply.stats is None:
        return
    reason = reply.stats.stop_reason
    if reason == StopReason.CONTEXT_FULL:
        raise ControllerError("this reply filled the context: there is no room to continue it")
    if reason not in CAN_CONTINUE:
        raise ControllerError("only a reply cut at its length limit, or stopped, can be continued")


def goes_on_alone(engine: ChatEngine, branch: BranchTokens, reply: Message) -> bool:
    """Whether ``reply``, the last message of ``branch``, goes on sampled alone (true) or
    the batch way (see the module docstring); refused in plain words when it cannot go on.

    ``branch.stepped[-1]`` tells whether the reply's tokens are the ones this model
    sampled alone. A reply written or edited by hand (no stats) has its template rendering
    for this model instead, its text as the cache holds it (the turn's closing belongs to
    the next message): the model goes on from that text. It and a version sampled in a
    batch go on the batch way; the caller settles the new version. A reply another model
    sampled is refused: its own tokens are that model's, not text typed for this one.
    """
    sampled = bool(branch.stepped) and branch.stepped[-1]
    if not sampled and not not_sampled_alone(reply):
        raise ControllerError("this reply was written by another model: only a reply of the loaded model, "
                              "or one written or edited by hand, can be continued")
    if len(branch.tokens) >= engine.n_ctx:
        raise ContextOverflow("the context is full at the end of this reply: there is no room to continue it",
                              tokens=len(branch.tokens), n_ctx=engine.n_ctx)
    return sampled


def continued_text(engine: ChatEngine, reply: Message, tokens: list[int], more: str) -> str:
    """The text of ``reply`` continued by ``more``, its tokens now ``tokens``.

    Not ``reply.text + more`` for a sampled reply: one cut between the bytes of a
    character ends in a replacement character, and the continuation's first bytes would
    become another; read as one run, the bytes make the character the model wrote. A
    reply's text as typed ends in a whole character, and its tokens may hold what the
    template adds around a reply (an empty reasoning block): its own text is kept.
    """
    return reply.text + more if reply.stats is None else engine.detokenize(tokens)


def batched_version(reply: Message) -> bool:
    """A reply sampled in a batch of versions (``GenerationStats.batch``)."""
    return reply.stats is not None and reply.stats.batch > 0


def not_sampled_alone(reply: Message) -> bool:
    """A reply written or edited by hand, or sampled in a batch: one going on from it goes
    on the batch way (see the module docstring)."""
    return reply.stats is None or batched_version(reply)


def cut_reply(engine: ChatEngine, branch: BranchTokens, chars: int, *, batched: bool = False) -> BranchTokens:
    """``branch`` with its last message, a reply, cut after the tokens whose text fills at
    most ``chars`` of its characters ("continue from here").

    The cut falls between tokens: the longest run of the reply's tokens whose text is no
    longer than ``chars``. Only a reply this model sampled can be cut, since only its
    tokens are what the model wrote: one written or edited by hand goes on from its end.
    ``batched``: the reply is a version this model sampled in a batch (``batched_version``).
    """
    if not batched and (not branch.stepped or not branch.stepped[-1]):
        raise ControllerError("only a reply the loaded model wrote can be continued from a place inside it "
                              "(a reply written or edited by hand goes on from its end)")
    start = branch.ends[-2] if len(branch.ends) > 1 else 0
    reply = branch.tokens[start:]
    if chars <= 0:
        raise ControllerError("choose a place after the reply's first word to continue from")
    if chars >= len(engine.detokenize(reply)):
        raise ControllerError("that is the end of the reply: continue it instead (or regenerate it)")
    low, high = 0, len(reply)  # the text of reply[:low] fits; that of reply[:high] may not
    while high - low > 1:
        middle = (low + high) // 2
        if len(engine.detokenize(reply[:middle])) <= chars:
            low = middle
        else:
            high = middle
    if low == 0:
        raise ControllerError("choose a place after the reply's first word to continue from")
    return BranchTokens(branch.tokens[:start + low], [*branch.ends[:-1], start + low], list(branch.stepped))


def whole_reply_first(engine: ChatEngine, whole: BranchTokens, cut: BranchTokens) -> Prepared | None:
    """Before a cut reply is made live: restore the whole reply first, where that is
    cheaper than the cut's own route. Returns what that restore did (None if not done).

    Attention cells can be cut at any token, but the checkpoints are found by the
    boundaries of the branch asked for, and a cut reply's last boundary is the reply's
    start: in a reopened chat, where nothing is live, its own route decodes the reply up to
    the cut again. Restored whole from the reply's checkpoints, then cut, it decodes one
    token (for the logits after the cut), as while the reply is still live. Only plain
    attention: a sliding window or a recurrent state at the reply's end cannot be taken
    back to the cut.
    """
    if engine.info.kind is not MemoryKind.PLAIN:
        return None
    own = engine.plan(cut.tokens, cut.ends, stepped=cut.stepped)
    if own.tokens_to_evaluate <= 1:
        return None
    restore = engine.plan(whole.tokens, whole.ends, need_logits=False, stepped=whole.stepped)
    if restore.tokens_to_evaluate or restore.estimate_seconds >= own.estimate_seconds:
        return None
    try:
        return engine.prepare(whole.tokens, whole.ends, whole.stepped, need_logits=False)
    except DecodeCancelled:
        raise GenerationCancelled("stopped before the reply started") from None
