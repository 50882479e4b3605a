"""Branches left a moment ago stay whole in the model's memory, and going back is exact.

Switching away from a branch parks it (``LiveSequence.park``: a copy of its whole state
within the model's memory); switching back puts that copy back, and only the new tokens
are evaluated. Nothing of the state crosses the host but its cell list, and the logits
are a from-scratch recompute's, bit for bit. A sliding window is never parked (its ring
layout would not come back), nor a branch larger than the budget.
"""

from __future__ import annotations

import pytest

from sessions.branching.branch_engine import BranchEngine
from sessions.llama.context import LlamaContext
from sessions.llama.state_blob import FLAGS_FULL

from .conftest import ALL_ARCHS
from .test_exactness import DENSE, PARAMS, branch, check, flat

BUDGET = 64 << 20
PARKING_ARCHS = [arch for arch in ALL_ARCHS if arch not in ("gemma3", "gemma4", "gpt-oss")]


def parking_engine(model, store, budget: int = BUDGET) -> BranchEngine:
    return BranchEngine(model, LlamaContext(model, PARAMS), store, policy=DENSE, parking=budget)


@pytest.mark.parametrize("arch", PARKING_ARCHS)
def test_a_switch_back_to_a_parked_branch_moves_no_state_through_the_host(loaded_models, arch):
    model = loaded_models[arch]
    engine = parking_engine(model, None)  # no checkpoint store: only the parked copy can help
    first = branch(model, 0, 1, 2, 3)
    engine.prepare(*flat(first))
    whole = engine.ctx.state_size(0, FLAGS_FULL)
    engine.prepare(*flat(branch(model, 0, 1, 4)))  # an edit: the first branch is parked
    assert len(engine.seq.parked) == 1
    estimate = engine.plan(*flat(first + branch(model, 5)))  # the switch's price counts on the parked copy
    assert estimate.keep == len(flat(first)[0]) and estimate.tokens_to_evaluate == len(branch(model, 5)[0])
    written = engine.ctx.bytes_written
    back = check(engine, model, first + branch(model, 5))  # back, and one more turn
    assert back.tokens_unparked == len(flat(first)[0]) == back.tokens_restored
    assert back.tokens_evaluated == len(branch(model, 5)[0]) and back.bytes_restored == 0
    moved = engine.ctx.bytes_written - written
    assert moved < whole / 20, (moved, whole)  # the cell list only: the state stayed where it was
    again = check(engine, model, branch(model, 0, 1, 4, 6))  # and to the edit, parked in its turn
    assert again.tokens_unparked == len(flat(branch(model, 0, 1, 4))[0])


def test_paging_between_three_branches_keeps_the_two_left_last(loaded_models):
    model = loaded_models["llama"]
    engine = parking_engine(model, None)
    tips = [branch(model, 0, 1, k) for k in (2, 3, 4)]
    for tip in tips:
        engine.prepare(*flat(tip))
    assert sorted(len(p.tokens) for p in engine.seq.parked.values()) == sorted(len(flat(t)[0]) for t in tips[:2])
    result = check(engine, model, tips[0])
    assert result.tokens_unparked == len(flat(tips[0])[0]) and result.tokens_evaluated == 0  # logits kept too


def test_a_sliding_window_and_a_branch_over_the_budget_are_not_parked(loaded_models):
    swa = parking_engine(loaded_models["gemma3"], None)
    assert swa.seq.parking == 0
    swa.prepare(*flat(branch(loaded_models["gemma3"], 0, 1)))
    swa.prepare(*flat(branch(loaded_models["gemma3"], 0, 2)))
    assert not swa.seq.parked
    model = loaded_models["llama"]
    small = parking_engine(model, None, budget=1024)
    small.prepare(*flat(branch(model, 0, 1)))
    small.prepare(*flat(branch(model, 0, 2)))
    assert not small.seq.parked
