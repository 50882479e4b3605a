"""Several new versions of a reply in one job: sampled in one batch, then made exact.

``write_versions`` makes the question live once and samples every version after it in
one batch (``ChatEngine.generate_versions``). Where no context for the batch can be made
(memory, most often) it writes them one after another instead, each from the question's
state, and says so. Each version streams under its own index.

A version sampled in the batch is stored as a reply not sampled alone
(``GenerationStats.batch``), and ``settle`` then makes it live the way every rebuild
does: decoded as one batch from the question's state. Only then are its checkpoints
taken, so that whatever goes on from it later (a reply after it, a reopen next week) is
bit for bit what a recompute of its tokens gives (``prepare`` decodes such a reply from
a boundary, in a rebuild's batches: ``plan_route``'s ``splittable``). The versions written
one after another are replies sampled alone, like any other.

At temperature 0 (or top-k 1: ``SamplingSettings.deterministic``) every version would be
the same reply, and the same tokens as the reply sampled alone, whose checkpoints (found
by their tokens) hold the state of a reply decoded one token at a time: such a request is
refused in a sentence.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sessions.branching.branch_engine import CONTINUABLE
from sessions.controller.reply import BranchTokens, WrittenReply, decode_rates, make_live
from sessions.errors import GenerationCancelled
from sessions.llama.batch_context import BatchUnavailable
from sessions.llama.context import DecodeCancelled
from sessions.reply_stats import reply_stats
from sessions.sampling import BOUNDS, MOST_VERSIONS, SamplingSettings
from sessions.stop_reason import StopReason

if TYPE_CHECKING:
    from sessions.branching.branch_engine import GenerateResult, PrepareResult, ProgressFn
    from sessions.engine.protocol import ChatEngine

__all__ = ["MOST_VERSIONS", "SAME_VERSIONS", "WrittenVersions", "settle", "version_seeds", "write_versions"]


SAME_VERSIONS = ("at temperature 0 (or top-k 1) every version would be the same reply: raise the temperature "
                 "(Ctrl+S in the app, --temp with ask) to write different ones")
"""Why several versions are refused when sampling is ``deterministic``."""


def version_seeds(sampling: SamplingSettings, count: int) -> list[int]:
    """Each version's seed: a fixed seed and the ones after it (the same seed twice would
    write the same reply), or new random ones; recorded with each version."""
    top = int(BOUNDS["seed"][1]) + 1
    if sampling.seed >= 0:
        return [(sampling.seed + k) % top for k in range(count)]
    return [random.getrandbits(31) for _ in range(count)]


@dataclass(frozen=True)
class WrittenVersions:
    versions: list[WrittenReply]
    """In order; a version stopped before its first token is left out."""
    indices: list[int]
    """Each version's index among those asked for (the index its text streamed under)."""
    fell_back: str = ""
    """Why they were not sampled in one batch, but one after another, alone (empty: they were)."""

    @property
    def batched(self) -> bool:
        return not self.fell_back


def write_versions(
    engine: ChatEngine,
    branch: BranchTokens,
    settings: Sequence[SamplingSettings],
    *,
    t_request: float,
    max_tokens: int | None,
    on_progress: ProgressFn,
    on_texts: Sequence[Callable[[str], None]],
    should_stop: Callable[[], bool],
    resume_decoding: Callable[[], None],
    opens_in_reasoning: bool = False,
) -> WrittenVersions:
    """One version per ``settings`` after ``branch``; ``GenerationCancelled`` when stopped
    before any token of any version."""
    prep = make_live(engine, branch, on_progress, should_stop)
    resume_decoding()
    wanted = max_tokens or settings[0].max_tokens
    room = engine.n_ctx - len(branch.tokens)
    limit = min(wanted, room)
    fell_back = ""
    assert prep.logits is not None  # asked for (need_logits defaults to True)
    try:
        results = engine.generate_versions(prep.logits, settings, max_tokens=limit,
                                           on_text=lambda k, text: on_texts[k](text), should_stop=should_stop)
        preps = [prep] + [_restored(prep, branch)] * (len(settings) - 1)
    except BatchUnavailable as why:
        fell_back = str(why)
        results, preps = _one_after_another(engine, branch, prep, settings, limit, on_progress, on_texts,
                                            should_stop)
    written, indices = [], []
    for k, (one, result, made_live) in enumerate(zip(settings, results, preps, strict=False)):
        if not result.tokens and result.stop_reason == StopReason.CANCELLED:
            continue
        indices.append(k)
        stats = replace(reply_stats(made_live, result, t_request, room=room, wanted=wanted,
                                    decode_rates=decode_rates(made_live)),
                        opened_in_reasoning=opens_in_reasoning, seed=one.seed, batch=0 if fell_back else len(settings))
        written.append(WrittenReply(result, stats, made_live))
    if not written:
        raise GenerationCancelled("stopped before the reply started")
    return WrittenVersions(written, indices, fell_back)


def settle(engine: ChatEngine, before: BranchTokens, version: Sequence[int], stop_reason: StopReason,
           on_progress: ProgressFn | None = None) -> PrepareResult | None:
    """Make a version sampled in a batch (its tokens ``version``, after the messages
    ``before``) live as a rebuild does (see the module docstring); its checkpoints are
    taken on the way. None when stopped first: it is stored already, and the next time
    its branch is made live does the same."""
    tokens = before.tokens + list(version)
    try:
        return engine.prepare(tokens, [*before.ends, len(tokens)], [*before.stepped, False], on_progress,
                              need_logits=stop_reason in CONTINUABLE)
    except DecodeCancelled:
        return None


def _restored(prep: PrepareResult, branch: BranchTokens) -> PrepareResult:
    """What the versions after the first cost on the way to their first token: the
    question's state, shared with the first (nothing evaluated)."""
    return replace(prep, tokens_restored=len(branch.tokens), tokens_evaluated=0, seconds=0.0, bytes_restored=0,
                   decode_seconds=0.0, state_seconds=0.0)


def _one_after_another(engine: ChatEngine, branch: BranchTokens, prep: PrepareResult,
                       settings: Sequence[SamplingSettings], limit: int, on_progress: ProgressFn,
                       on_texts: Sequence[Callable[[str], None]], should_stop: Callable[[], bool],
                       ) -> tuple[list[GenerateResult], list[PrepareResult]]:
    """Each version alone, from the question's state (restored from its checkpoint after
    the first: nothing of the prompt is evaluated again)."""
    results: list[GenerateResult] = []
    preps: list[PrepareResult] = []
    for k, one in enumerate(settings):
        if k:
            if should_stop():
                break
            try:
                prep = engine.prepare(branch.tokens, branch.ends, branch.stepped, on_progress, reply_follows=True)
            except DecodeCancelled:
                break
        assert prep.logits is not None
        result = engine.generate(prep.logits, one, max_tokens=limit, on_text=on_texts[k], should_stop=should_stop)
        results.append(result)
        preps.append(prep)
        if result.stop_reason == StopReason.CANCELLED:
            break
    return results, preps
