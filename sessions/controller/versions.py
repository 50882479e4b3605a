"""Several new versions of a reply in one job: sampled in one batch, then made exact.

The question is made live once (``sessions.controller.reply.write_versions``), and
``sample_versions`` samples every version after it in one batch
(``ChatEngine.generate_versions``). Where no context for the batch can be made (memory,
most often) it writes them one after another instead, each from the question's state,
and says so. Each version streams under its own index.

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

from sessions.controller.branch_tokens import BranchTokens
from sessions.engine.reports import CONTINUABLE
from sessions.errors import BatchUnavailable, DecodeCancelled
from sessions.sampling import BOUNDS, MOST_VERSIONS, SamplingSettings
from sessions.stop_reason import StopReason

if TYPE_CHECKING:
    from sessions.engine.protocol import ChatEngine
    from sessions.engine.reports import Generated, Prepared, ProgressFn

__all__ = ["MOST_VERSIONS", "SAME_VERSIONS", "SampledVersions", "sample_versions", "settle", "version_seeds"]


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
class SampledVersions:
    """The versions sampled after a live branch, and how each was made live."""

    results: list[Generated]
    """One per version asked for, in order, until one was stopped."""
    preps: list[Prepared]
    """What making the branch live cost each version (``_restored`` for a batch's second on)."""
    fell_back: str = ""
    """Why they were not sampled in one batch, but one after another, alone (empty: they were)."""


def sample_versions(engine: ChatEngine, branch: BranchTokens, prep: Prepared,
                    settings: Sequence[SamplingSettings], *, limit: int, on_progress: ProgressFn,
                    on_texts: Sequence[Callable[[str], None]], should_stop: Callable[[], bool]) -> SampledVersions:
    """One reply per ``settings`` after ``branch``, which ``prep`` made live: in one batch,
    or one after another where no context for the batch can be made."""
    assert prep.logits is not None  # asked for (need_logits defaults to True)
    try:
        results = engine.generate_versions(prep.logits, settings, max_tokens=limit,
                                           on_text=lambda k, text: on_texts[k](text), should_stop=should_stop)
    except BatchUnavailable as why:
        results, preps = _one_after_another(engine, branch, prep, settings, limit, on_progress, on_texts,
                                            should_stop)
        return SampledVersions(results, preps, str(why))
    return SampledVersions(results, [prep] + [_restored(prep, branch)] * (len(settings) - 1))


def settle(engine: ChatEngine, before: BranchTokens, version: Sequence[int], stop_reason: StopReason,
           on_progress: ProgressFn | None = None) -> Prepared | None:
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


def _restored(prep: Prepared, branch: BranchTokens) -> Prepared:
    """What the versions after the first cost on the way to their first token: the
    question's state, shared with the first (nothing evaluated)."""
    return replace(prep, tokens_restored=len(branch.tokens), tokens_evaluated=0, seconds=0.0, bytes_restored=0,
                   decode_seconds=0.0, state_seconds=0.0)


def _one_after_another(engine: ChatEngine, branch: BranchTokens, prep: Prepared,
                       settings: Sequence[SamplingSettings], limit: int, on_progress: ProgressFn,
                       on_texts: Sequence[Callable[[str], None]], should_stop: Callable[[], bool],
                       ) -> tuple[list[Generated], list[Prepared]]:
    """Each version alone, from the question's state (restored from its checkpoint after
    the first: nothing of the prompt is evaluated again)."""
    results: list[Generated] = []
    preps: list[Prepared] = []
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
