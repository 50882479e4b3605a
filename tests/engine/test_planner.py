"""The route planner on its own: which plan for which memory kind and store contents."""

from __future__ import annotations

from itertools import pairwise

import pytest

from sessions.branching.planner import LiveState, SegmentInfo, SnapshotInfo, common_prefix, cut_allowed, plan_route
from sessions.memory_kind import MemoryKind as K

TARGET = list(range(100))
BOUNDS = [20, 50, 80, 100]
STARTS = {end: start for start, end in pairwise([0, *BOUNDS])}


def live(n: int, pos_min: int = 0, logits: bool = False, tokens=None) -> LiveState:
    tokens = tokens if tokens is not None else TARGET[:n]
    return LiveState(tokens=tokens, pos_min=pos_min if n else -1, has_logits=logits)


def cells(*ends: int):
    known = {e: SegmentInfo(STARTS[e], e, "ram", 1000) for e in ends}
    return known.get


def snaps(*ends: int, logits: bool = True, state: bool = True, tier="ram"):
    known = {e: SnapshotInfo(e, tier, state, logits, 5000) for e in ends}
    return known.get


def route(kind, live_state, *, c=(), s=(), logits=True, state=True, n_swa=16):
    return plan_route(kind, n_swa, live_state, TARGET, BOUNDS, cells(*c), snaps(*s, logits=logits, state=state))


def test_extends_live_without_restoring():
    plan = route(K.HYBRID, live(50))
    assert (plan.keep, plan.restore, plan.evaluate_from) == (50, (), 50)


@pytest.mark.parametrize("kind", [K.PLAIN, K.SWA, K.HYBRID, K.RECURRENT])
def test_identical_prefix_with_logits_evaluates_nothing(kind):
    plan = route(kind, live(100, logits=True))
    assert plan.tokens_to_evaluate == 0 and plan.logits_source == "live"


def test_plain_cuts_back_to_a_boundary():
    other = TARGET[:60] + [999] * 30
    plan = route(K.PLAIN, live(90, tokens=other))
    assert plan.keep == 50 and plan.evaluate_from == 50 and plan.rewind is None


def test_hybrid_cuts_only_with_a_snapshot_to_rewind_to():
    other = TARGET[:60] + [999] * 30
    cleared = route(K.HYBRID, live(90, tokens=other))
    assert cleared.keep == 0 and cleared.evaluate_from == 0
    rewound = route(K.HYBRID, live(90, tokens=other), s=(50,), logits=False)
    assert rewound.keep == 50 and rewound.rewind is not None and rewound.tokens_restored == 0


def test_cells_need_a_snapshot_at_their_end_for_hybrid_and_swa():
    for kind in (K.HYBRID, K.SWA):
        no_snapshot = route(kind, live(0), c=(20, 50))
        assert no_snapshot.evaluate_from == 0
        restored = route(kind, live(0), c=(20, 50), s=(20,), logits=False)
        assert [r.end for r in restored.restore] == [20] and restored.evaluate_from == 20
        assert restored.snapshot is not None and restored.tokens_restored == 20


def test_swa_cut_only_while_the_window_holds():
    assert cut_allowed(K.SWA, 16, live(90, pos_min=10), 50)
    assert not cut_allowed(K.SWA, 16, live(90, pos_min=40), 50)
    assert cut_allowed(K.SWA, 16, live(90, pos_min=0), 10)  # nothing has slid yet
    other = TARGET[:60] + [999] * 30
    held = route(K.SWA, live(90, pos_min=10, tokens=other))
    assert held.keep == 50 and held.rewind is None
    slid = route(K.SWA, live(90, pos_min=60, tokens=other), c=(20,))
    assert slid.keep == 0 and slid.evaluate_from == 0  # the window cannot be rebuilt at 20
    rewound = route(K.SWA, live(90, pos_min=60, tokens=other), c=(20,), s=(20,), logits=False)
    assert rewound.keep == 20 and rewound.rewind is not None  # cheaper than restoring the cells too


def test_recurrent_restores_only_the_deepest_state():
    plan = route(K.RECURRENT, live(0), s=(50, 80), logits=False)
    assert plan.restore == () and plan.snapshot is not None and plan.evaluate_from == 80


def test_chain_stops_at_a_missing_segment():
    plan = route(K.PLAIN, live(0), c=(20, 80))
    assert [s.end for s in plan.restore] == [20] and plan.evaluate_from == 20


def test_end_without_logits_decodes_the_last_segment_again():
    plan = route(K.PLAIN, live(0), c=(20, 50, 80, 100))
    assert plan.evaluate_from == 80 and plan.logits_source == "decode"
    with_logits = route(K.PLAIN, live(0), c=(20, 50, 80, 100), s=(100,), state=False)
    assert with_logits.evaluate_from == 100 and with_logits.logits_source == "snapshot"
    window_only = route(K.SWA, live(0), c=(20, 50, 80, 100), s=(80, 100), logits=False)
    assert window_only.evaluate_from == 80


def test_plan_prefers_evaluating_less_and_estimates_cost():
    plan = route(K.PLAIN, live(20), c=(20, 50, 80))
    assert plan.keep == 20 and plan.tokens_restored == 60 and plan.tokens_to_evaluate == 20
    assert plan.estimate_seconds > 0 and plan.bytes_restored == 2000


def test_disk_costs_more_than_ram_for_the_same_route():
    ram = plan_route(K.SWA, 16, live(0), TARGET, BOUNDS, cells(20, 50), snaps(50, logits=False))
    disk = plan_route(K.SWA, 16, live(0), TARGET, BOUNDS, cells(20, 50), snaps(50, logits=False, tier="disk"))
    assert ram.evaluate_from == disk.evaluate_from == 50
    assert disk.estimate_seconds > ram.estimate_seconds


def test_boundaries_must_end_at_the_target():
    with pytest.raises(ValueError):
        plan_route(K.PLAIN, 0, live(0), TARGET, [20, 50], cells(), snaps())


@pytest.mark.parametrize("length", [0, 1, 255, 256, 257, 600])
def test_common_prefix_finds_the_first_difference_anywhere(length):
    """Chunk by chunk, then token by token: the same answer as a plain loop, at and
    around the chunk edges, for sequences of other lengths and types."""
    base = list(range(1000, 1000 + 700))
    for at in sorted({0, 1, 254, 255, 256, 257, 511, 512, 513, length - 1, length}):
        if not 0 <= at < length:
            continue
        other = base[:length]
        other[at] = -1
        assert common_prefix(base[:length], other) == at
    assert common_prefix(base[:length], base) == length  # one a prefix of the other
    assert common_prefix(base, base[:length]) == length
    assert common_prefix(tuple(base[:length]), base) == length  # a tuple against a list


@pytest.mark.parametrize("kind", [K.PLAIN, K.SWA, K.HYBRID, K.RECURRENT])
def test_the_store_is_asked_about_each_boundary_once(kind):
    """Every start walks the chain after it; the answers are kept for the plan, so a
    branch of n boundaries costs n lookups of each kind, not n**2 / 2."""
    asked: list[tuple[str, int]] = []
    known_cells, known_snaps = cells(*BOUNDS), snaps(*BOUNDS)

    def cell_lookup(b: int):
        asked.append(("cells", b))
        return known_cells(b)

    def snap_lookup(b: int):
        asked.append(("snapshot", b))
        return known_snaps(b)

    other = TARGET[:90] + [999] * 5  # every boundary before 90 is a start
    plan_route(kind, 16, live(95, tokens=other), TARGET, BOUNDS, cell_lookup, snap_lookup)
    assert asked and len(asked) == len(set(asked))


@pytest.mark.parametrize("kind", [K.PLAIN, K.SWA, K.HYBRID, K.RECURRENT])
def test_decoding_starts_between_boundaries_only_where_a_reply_is_replayed_token_by_token(kind):
    """Live holds 65 tokens of the message [50, 80): kept and extended only if that message
    is replayed one token at a time; else decoding starts at its boundary (50), in the
    batches a rebuild decodes it in."""
    stepped = plan_route(kind, 16, live(65), TARGET, BOUNDS, cells(), snaps(50), splittable=lambda k: 50 < k < 80)
    assert (stepped.keep, stepped.evaluate_from) == (65, 65)
    batched = plan_route(kind, 16, live(65), TARGET, BOUNDS, cells(), snaps(50), splittable=lambda _k: False)
    assert batched.evaluate_from in (0, 50) and batched.keep <= 50


@pytest.mark.parametrize("splittable, keep", [(lambda k: 50 < k < 80, 64), (lambda _k: False, 50)])
def test_a_cut_inside_the_live_message_decodes_one_token_only_in_a_stepped_reply(splittable, keep):
    """A target that ends inside what is live (a reply cut): its last token decoded alone
    only where the reply was sampled token by token."""
    plan = plan_route(K.PLAIN, 0, live(80), TARGET[:65], [20, 50, 65], cells(), snaps(), splittable=splittable)
    assert plan.keep == keep and plan.evaluate_from == keep
