"""How long making a branch live will take, from the speeds this machine has shown.

The engine's plan prices every token to evaluate alike. But a branch is rebuilt in two
kinds of calls: messages typed or pasted are evaluated in batches, and generated replies
are replayed one token per call (the way they were first decoded, which is what keeps the
rebuild bit-identical), several times slower per token. The engine measures both rates
from its own ``llama_decode`` calls and hands them over with the plan (``RoutePlan.rates``);
here each part of the branch is priced at its own rate.

Before the engine has decoded anything (a reopened chat, restored from disk), the rates
come from the open chat's stored replies that this model wrote: the decode rates the
engine had measured when each was stored, or for a reply stored before those were kept,
its prompt's speed and its generation speed. With none of those (a model loaded into a
chat another model wrote), from the model's size (``size_prior``): the planner's one
default is a 100M-parameter model's, fifteen times too slow for the tiny demo model.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, replace

from sessions.controller.branch_tokens import BranchTokens
from sessions.engine.reports import BATCH_MIN, STEP_PRIOR, Rates, RoutePlan
from sessions.tree import GenerationStats

RECENT = 8
"""Stored replies a prior is taken from (the newest: the machine and settings of now)."""
BATCH_FLOOR, STEP_FLOOR = 3e-4, 5e-4
"""Seconds a token costs in a batch and alone whatever the model's size: the calls'
fixed costs (the figures: docs/benchmarks.md, "The switch estimate")."""
BATCH_PER_PARAMETER, STEP_PER_PARAMETER = 3.5e-11, 3e-10
"""Seconds per token and per parameter on top, on one thread. Replaced by the engine's
own measurements once it has decoded, so a GPU or more threads only make the first
estimate long."""


@dataclass(frozen=True)
class TokenCounts:
    """The tokens a plan evaluates, split by how they are decoded."""

    batched: int
    stepped: int


def token_counts(branch: BranchTokens, evaluate_from: int) -> TokenCounts:
    """How many of ``branch``'s tokens from ``evaluate_from`` on are in batches, how many one by one."""
    batched = stepped = 0
    start = 0
    for end, one_by_one in zip(branch.ends, branch.stepped, strict=True):
        part = max(0, end - max(start, evaluate_from))
        if one_by_one:
            stepped += part
        else:
            batched += part
        start = end
    return TokenCounts(batched, stepped)


def stored_rates(replies: Iterable[GenerationStats], fingerprint: str, rates: Rates) -> Rates:
    """``rates`` with decode rates from the newest replies ``fingerprint`` wrote (as stored);
    ``rates`` itself when none says how fast it went."""
    mine = [s for s in replies if s.sampled_by == fingerprint][-RECENT:]
    steps = [s.decode_step_seconds for s in mine if s.decode_step_seconds > 0] or \
            [1.0 / s.generation_tps for s in mine if s.generation_tps > 0 and s.tokens_generated >= BATCH_MIN]
    batches = [s.decode_batch_seconds for s in mine if s.decode_batch_seconds > 0] or \
              [s.prompt_seconds / s.tokens_evaluated for s in mine
               if s.tokens_evaluated >= BATCH_MIN and s.prompt_seconds > 0]
    if not steps and not batches:
        return rates
    step = statistics.median(steps) if steps else None
    batched = statistics.median(batches) if batches else None
    if batched is None:
        assert step is not None
        batched = step / STEP_PRIOR
    return replace(rates, eval_per_token=batched, step_seconds=step or batched * STEP_PRIOR, measured=True)


def size_prior(rates: Rates, parameters: int) -> Rates:
    """``rates`` with decode rates guessed from the model's ``parameters``, when nothing has
    measured them (``rates`` itself when something has)."""
    if rates.measured or parameters <= 0:
        return rates
    return replace(rates, eval_per_token=BATCH_FLOOR + BATCH_PER_PARAMETER * parameters,
                   step_seconds=STEP_FLOOR + STEP_PER_PARAMETER * parameters)


def priced(plan: RoutePlan, branch: BranchTokens, rates: Rates | None = None) -> RoutePlan:
    """``plan`` for ``branch`` with its seconds priced part by part: batched tokens, tokens
    replayed one by one, and the bytes it restores, at ``rates`` (default: the plan's own)."""
    rates = rates or plan.rates
    counts = token_counts(branch, plan.evaluate_from)
    seconds = counts.batched * rates.eval_per_token + counts.stepped * rates.step_seconds
    return replace(plan, estimate_seconds=seconds + plan.restore_seconds(rates), rates=rates)
