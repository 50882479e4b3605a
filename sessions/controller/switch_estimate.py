"""How long making a branch live will take, from the speeds this machine has shown.

The engine's plan prices every token to evaluate alike. But a branch is rebuilt in two
kinds of calls: messages typed or pasted are evaluated in batches, and generated replies
are replayed one token per call (the way they were first decoded, which is what keeps the
rebuild bit-identical), several times slower per token. The engine measures both rates
from its own ``llama_decode`` calls and hands them over with the plan (``RoutePlan.rates``);
here each part of the branch is priced at its own rate.

Before the engine has decoded anything (a reopened chat, restored from disk), the rates
come from the open chat's stored replies that this model wrote: their prompt's speed and
their generation speed were measured on this machine when they were made.
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
    steps = [1.0 / s.generation_tps for s in mine if s.generation_tps > 0 and s.tokens_generated >= BATCH_MIN]
    batches = [s.prompt_seconds / s.tokens_evaluated for s in mine
               if s.tokens_evaluated >= BATCH_MIN and s.prompt_seconds > 0]
    if not steps and not batches:
        return rates
    step = statistics.median(steps) if steps else None
    batched = statistics.median(batches) if batches else None
    if batched is None:
        assert step is not None
        batched = step / STEP_PRIOR
    return replace(rates, eval_per_token=batched, step_seconds=step or batched * STEP_PRIOR, measured=True)


def priced(plan: RoutePlan, branch: BranchTokens, rates: Rates | None = None) -> RoutePlan:
    """``plan`` for ``branch`` with its seconds priced part by part: batched tokens, tokens
    replayed one by one, and the bytes it restores, at ``rates`` (default: the plan's own)."""
    rates = rates or plan.rates
    counts = token_counts(branch, plan.evaluate_from)
    seconds = counts.batched * rates.eval_per_token + counts.stepped * rates.step_seconds
    return replace(plan, estimate_seconds=seconds + plan.restore_seconds(rates), rates=rates)
