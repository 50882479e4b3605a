"""How long making a branch live will take, from the speeds this machine has shown.

The engine's plan prices every token to evaluate alike, at the speed of its last prompt.
But a branch is rebuilt in two kinds of steps: messages typed or pasted are evaluated in
batches, and generated replies are replayed one token at a time (the way they were first
decoded, which is what keeps the rebuild bit-identical). One token at a time is several
times slower per token, so a switch that replays replies took three times the estimate
(measured: ``tests/bench/switch_estimate``). ``SwitchSpeeds`` therefore learns both speeds
from what the controller sees, batched prompts, replayed replies and the speed replies are
generated at, and the restore speed per checkpoint byte, and prices each part of a plan at
its own speed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sessions.controller.reply import BranchTokens
from sessions.tree import GenerationStats

if TYPE_CHECKING:
    from sessions.branching.branch_engine import PrepareResult
    from sessions.branching.planner import Plan

MIN_SAMPLE = 8
"""Fewest tokens a measurement must cover to be learned from."""
RESTORE_SECONDS_PER_BYTE = 1 / 2e9
"""Until a restore has been timed: checkpoints copy back at about 2 GB/s."""
STEP_PRIOR = 4.0
"""Until both speeds are measured: a token decoded alone costs about four in a batch
(a CPU, measured with ``tests/bench/switch_estimate``)."""


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


class SwitchSpeeds:
    """Seconds per batched token, per replayed token and per restored byte, as measured.

    A measurement that mixes both kinds of tokens is split with the speed already known
    for one of them; with neither known yet, with ``STEP_PRIOR``.
    """

    def __init__(self) -> None:
        self.batched: float | None = None
        self.stepped: float | None = None
        self.per_byte: float | None = None

    def observe(self, branch: BranchTokens, prep: PrepareResult, generated: GenerationStats | None = None) -> None:
        """Learn from ``branch`` made live (and from the reply generated after it, if any)."""
        counts = token_counts(branch, len(branch.tokens) - prep.tokens_evaluated)
        batched, stepped = counts.batched, counts.stepped
        decode = prep.decode_seconds or prep.seconds
        if batched + stepped >= MIN_SAMPLE:
            if not stepped or (self.stepped is not None and batched >= MIN_SAMPLE):
                self.batched = max(decode - stepped * (self.stepped or 0.0), 0.0) / batched
            elif not batched or self.batched is not None:
                self.stepped = max(decode - batched * (self.batched or 0.0), 0.0) / stepped
            else:
                self.batched = decode / (batched + STEP_PRIOR * stepped)
                self.stepped = STEP_PRIOR * self.batched
        if prep.bytes_restored >= 1 << 20 and not prep.tokens_evaluated:
            self.per_byte = prep.seconds / prep.bytes_restored
        if generated is not None and generated.tokens_generated >= MIN_SAMPLE and generated.generation_tps > 0:
            self.stepped = 1.0 / generated.generation_tps

    def estimate(self, plan: Plan, branch: BranchTokens) -> Plan:
        """``plan`` for ``branch``, its seconds priced at the speeds measured.

        Before any measurement the engine's rate (one for every token) is taken for the
        batched ones, and ``STEP_PRIOR`` times it for the ones replayed one at a time.
        """
        counts = token_counts(branch, plan.evaluate_from)
        per_byte = self.per_byte or RESTORE_SECONDS_PER_BYTE
        restore = plan.bytes_restored * per_byte
        batched = self.batched
        if batched is None:
            todo = plan.tokens_to_evaluate
            batched = max(plan.estimate_seconds - restore, 0.0) / todo if todo else 0.0
        stepped = self.stepped if self.stepped is not None else STEP_PRIOR * batched
        return replace(plan, estimate_seconds=counts.batched * batched + counts.stepped * stepped + restore)
