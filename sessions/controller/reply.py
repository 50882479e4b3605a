"""Writing one reply: make the branch live, sample, and measure what it cost.

Kept apart from the controller, which decides *which* branch and stores the result; this
is the blocking part in between, run by a worker thread holding the engine lock.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sessions.errors import ContextOverflow, GenerationCancelled
from sessions.events import Listener, TextStreamed
from sessions.llama.context import DecodeCancelled
from sessions.reply_stats import reply_stats
from sessions.sampling import SamplingSettings
from sessions.stop_reason import StopReason
from sessions.tree import GenerationStats

if TYPE_CHECKING:
    from sessions.branching.branch_engine import GenerateResult, PrepareResult, ProgressFn
    from sessions.engine.protocol import ChatEngine


@dataclass(frozen=True)
class BranchTokens:
    """A branch as the engine takes it (see ``sessions.controller.branch_tokens``)."""

    tokens: list[int]
    ends: list[int]
    stepped: list[bool]


@dataclass(frozen=True)
class WrittenReply:
    result: GenerateResult
    stats: GenerationStats
    prep: PrepareResult
    """How the branch was made live before the reply (what it restored and evaluated)."""


def streamed_text(listener: Listener, *, opens_in_reasoning: bool = False,
                  prompt_tokens: int = 0, version: int | None = None) -> Callable[[str], None]:
    """The ``on_text`` of one reply: each piece goes to ``listener`` with the count and time
    so far, whether the reply began inside reasoning, and how full the context is with the
    ``prompt_tokens`` it follows (``TextStreamed``); ``version``: which of several written
    at once it is."""
    first: float | None = None
    count = 0

    def on_text(text: str) -> None:
        nonlocal first, count
        now = time.perf_counter()
        first = now if first is None else first
        count += 1
        listener(TextStreamed(text, count, now - first, opens_in_reasoning,
                              prompt_tokens + count if prompt_tokens else 0, version))

    return on_text


def make_live(engine: ChatEngine, branch: BranchTokens, on_progress: ProgressFn,
              should_stop: Callable[[], bool]) -> PrepareResult:
    """The branch a reply answers made live, its checkpoints left to read after the reply;
    ``GenerationCancelled`` when stopped before, ``ContextOverflow`` when it leaves no room."""
    if should_stop():
        raise GenerationCancelled("stopped before the reply started")
    if len(branch.tokens) >= engine.n_ctx:
        raise ContextOverflow.of_branch(len(branch.tokens), engine.n_ctx)
    try:
        return engine.prepare(branch.tokens, branch.ends, branch.stepped, on_progress, reply_follows=True)
    except DecodeCancelled:
        raise GenerationCancelled("stopped before the reply started") from None


def write_reply(
    engine: ChatEngine,
    branch: BranchTokens,
    settings: SamplingSettings,
    *,
    t_request: float,
    max_tokens: int | None,
    on_progress: ProgressFn,
    on_text: Callable[[str], None],
    should_stop: Callable[[], bool],
    resume_decoding: Callable[[], None],
    opens_in_reasoning: bool = False,
    made_live: PrepareResult | None = None,
    alone: bool = True,
) -> WrittenReply:
    """Answer the branch; raises ``GenerationCancelled`` when stopped before any token.

    The reply gets ``max_tokens`` (default: the sampling limit) or what is left of the
    context, whichever is less; a reply cut by the context says so (``context_full``).
    ``t_request`` (``perf_counter``) is when the reply was asked for: the time to the
    first token counts from there. ``opens_in_reasoning`` goes into the stats
    (``GenerationStats.opened_in_reasoning``). ``made_live``: what an earlier ``prepare``
    of this job restored and evaluated on the way to the branch, counted in the stats.
    Not ``alone``: the reply is sampled as a batch of one version
    (``ChatEngine.generate_versions``), to be stored as not sampled alone, as what it goes
    on from was (``sessions.controller.versions``).
    """
    prep = make_live(engine, branch, on_progress, should_stop)
    resume_decoding()
    if settings.seed < 0:  # a new seed, chosen here to be stored with the reply
        settings = settings.with_(seed=random.getrandbits(31))
    wanted = max_tokens or settings.max_tokens
    room = engine.n_ctx - len(branch.tokens)
    if made_live is not None:
        prep = replace(prep, tokens_restored=made_live.tokens_restored + prep.tokens_restored,
                       tokens_evaluated=made_live.tokens_evaluated + prep.tokens_evaluated,
                       seconds=made_live.seconds + prep.seconds,
                       bytes_restored=made_live.bytes_restored + prep.bytes_restored,
                       decode_seconds=made_live.decode_seconds + prep.decode_seconds,
                       state_seconds=made_live.state_seconds + prep.state_seconds)
    assert prep.logits is not None  # asked for (need_logits defaults to True)
    if alone:
        result = engine.generate(prep.logits, settings, max_tokens=min(wanted, room), on_text=on_text,
                                 should_stop=should_stop)
    else:
        (result,) = engine.generate_versions(prep.logits, [settings], max_tokens=min(wanted, room),
                                             on_text=lambda _version, text: on_text(text), should_stop=should_stop)
    if not result.tokens and result.stop_reason == StopReason.CANCELLED:
        raise GenerationCancelled("stopped before the reply started")
    stats = replace(reply_stats(prep, result, t_request, room=room, wanted=wanted),
                    opened_in_reasoning=opens_in_reasoning, seed=settings.seed, batch=0 if alone else 1)
    return WrittenReply(result, stats, prep)
