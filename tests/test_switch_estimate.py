"""The switch estimate prices replayed replies at their own, measured speed."""

from __future__ import annotations

import numpy as np

from sessions.branching.branch_engine import PrepareResult
from sessions.branching.planner import Plan
from sessions.controller.reply import BranchTokens
from sessions.controller.switch_estimate import STEP_PRIOR, SwitchSpeeds, TokenCounts, token_counts
from sessions.tree import GenerationStats

# system 100 tokens, user 50, a generated reply 200, user 50
BRANCH = BranchTokens(tokens=list(range(400)), ends=[100, 150, 350, 400], stepped=[False, False, True, False])


def plan(evaluate_from: int, estimate: float = 0.0, target: int = 400) -> Plan:
    return Plan(keep=evaluate_from, restore=(), evaluate_from=evaluate_from, target_len=target,
                logits_source="decode", estimate_seconds=estimate)


def prepared(evaluated: int, decode: float, bytes_restored: int = 0, seconds: float | None = None) -> PrepareResult:
    return PrepareResult(np.zeros(1, dtype=np.float32), plan(400 - evaluated), 0, evaluated,
                         seconds if seconds is not None else decode, bytes_restored, decode)


def test_tokens_are_counted_by_how_they_are_decoded():
    assert token_counts(BRANCH, 0) == TokenCounts(batched=200, stepped=200)
    assert token_counts(BRANCH, 250) == TokenCounts(batched=50, stepped=100)
    assert token_counts(BRANCH, 400) == TokenCounts(0, 0)


def test_before_any_measurement_replayed_tokens_cost_the_prior_times_the_engine_rate():
    speeds = SwitchSpeeds()
    priced = speeds.estimate(plan(0, estimate=0.4), BRANCH)  # the engine: 400 tokens at 1 ms
    assert np.isclose(priced.estimate_seconds, 200 * 1e-3 + 200 * STEP_PRIOR * 1e-3)


def test_speeds_are_learned_from_prompts_replays_replies_and_restores():
    speeds = SwitchSpeeds()
    speeds.observe(BRANCH, prepared(50, decode=0.1))  # the last message alone: batched, 2 ms a token
    assert np.isclose(speeds.batched, 2e-3)
    speeds.observe(BRANCH, prepared(250, decode=0.1 + 200 * 9e-3))  # a reply replayed, 9 ms a token
    assert np.isclose(speeds.stepped, 9e-3)
    speeds.observe(BRANCH, prepared(0, decode=0.0, bytes_restored=4 << 20, seconds=0.004))
    assert np.isclose(speeds.per_byte, 0.004 / (4 << 20))
    speeds.observe(BRANCH, prepared(50, decode=0.1), GenerationStats(tokens_generated=40, generation_tps=125.0))
    assert np.isclose(speeds.stepped, 8e-3)  # a reply's generation speed is what replaying it costs
    priced = speeds.estimate(plan(100, estimate=0.01), BRANCH)
    assert np.isclose(priced.estimate_seconds, 100 * 2e-3 + 200 * 8e-3)
