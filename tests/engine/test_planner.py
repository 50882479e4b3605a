"""The route planner on its own: which plan for which memory kind and store contents."""

from __future__ import annotations

import pytest

from sessions.engine.planner import LiveState, SegmentInfo, cut_allowed, plan_route
from sessions.memory_kind import MemoryKind as K

TARGET = list(range(100))
BOUNDS = [20, 50, 80, 100]


def live(n: int, pos_min: int = 0, logits: bool = False, tokens=None) -> LiveState:
    tokens = tokens if tokens is not None else TARGET[:n]
    return LiveState(tokens=tokens, pos_min=pos_min if n else -1, has_logits=logits)


def store_with(*ends: int, logits: bool = True):
    starts = dict(zip(BOUNDS, [0] + BOUNDS[:-1], strict=True))
    known = {e: SegmentInfo(starts[e], e, "ram", logits) for e in ends}
    return known.get


def test_extends_live_without_restoring():
    plan = plan_route(K.HYBRID, 0, live(50), TARGET, BOUNDS, store_with())
    assert (plan.keep, plan.restore, plan.evaluate_from) == (50, (), 50)


@pytest.mark.parametrize("kind", [K.PLAIN, K.SWA, K.HYBRID, K.RECURRENT])
def test_identical_prefix_with_logits_evaluates_nothing(kind):
    plan = plan_route(kind, 16, live(100, logits=True), TARGET, BOUNDS, store_with())
    assert plan.tokens_to_evaluate == 0 and plan.logits_source == "live"


def test_plain_cuts_back_to_a_boundary():
    other = TARGET[:60] + [999] * 30
    plan = plan_route(K.PLAIN, 0, live(90, tokens=other), TARGET, BOUNDS, store_with())
    assert plan.keep == 50 and plan.evaluate_from == 50


def test_hybrid_never_cuts_it_restores_or_clears():
    other = TARGET[:60] + [999] * 30
    cleared = plan_route(K.HYBRID, 0, live(90, tokens=other), TARGET, BOUNDS, store_with())
    assert cleared.keep == 0 and cleared.evaluate_from == 0
    restored = plan_route(K.HYBRID, 0, live(90, tokens=other), TARGET, BOUNDS, store_with(20, 50))
    assert restored.keep == 0 and restored.tokens_restored == 50 and restored.evaluate_from == 50


def test_swa_cut_only_while_the_window_holds():
    assert cut_allowed(K.SWA, 16, live(90, pos_min=10), 50)
    assert not cut_allowed(K.SWA, 16, live(90, pos_min=40), 50)
    assert cut_allowed(K.SWA, 16, live(90, pos_min=0), 10)  # nothing has slid yet
    other = TARGET[:60] + [999] * 30
    slid = plan_route(K.SWA, 16, live(90, pos_min=60, tokens=other), TARGET, BOUNDS, store_with(20))
    assert slid.keep == 0 and slid.evaluate_from == 20


def test_recurrent_restores_only_the_deepest_state():
    plan = plan_route(K.RECURRENT, 0, live(0), TARGET, BOUNDS, store_with(50, 80))
    assert [s.end for s in plan.restore] == [80] and plan.evaluate_from == 80


def test_chain_stops_at_a_missing_segment():
    plan = plan_route(K.PLAIN, 0, live(0), TARGET, BOUNDS, store_with(20, 80))
    assert [s.end for s in plan.restore] == [20] and plan.evaluate_from == 20


def test_end_without_logits_decodes_the_last_segment_again():
    plan = plan_route(K.PLAIN, 0, live(0), TARGET, BOUNDS, store_with(20, 50, 80, 100, logits=False))
    assert plan.evaluate_from == 80 and plan.logits_source == "decode"


def test_plan_prefers_evaluating_less_and_estimates_cost():
    plan = plan_route(K.PLAIN, 0, live(20), TARGET, BOUNDS, store_with(20, 50, 80))
    assert plan.keep == 20 and plan.tokens_restored == 60 and plan.tokens_to_evaluate == 20
    assert plan.estimate_seconds > 0


def test_boundaries_must_end_at_the_target():
    with pytest.raises(ValueError):
        plan_route(K.PLAIN, 0, live(0), TARGET, [20, 50], store_with())
