"""Recurrent states under a disk budget: thinned evenly, never down to a full re-process.

A hybrid model's recurrent state can be far larger than the attention cells of the tokens
between two of them (Granite-H, Qwen3.5: tens to hundreds of MB a state). With the disk
budget at the cells plus a quarter of what the states want, the disk tier keeps a state
every few, evenly (``disk_index``: the state nearest the one before it goes first), so
after a reopen an edit anywhere in the chat re-decodes at most four times the spacing of
states, and always exactly.
"""

from __future__ import annotations

import dataclasses

import pytest

from sessions.branching.snapshot_policy import RECURRENT_SPACING, SnapshotPolicy
from sessions.checkpoints import CheckpointStore
from sessions.checkpoints.listing import list_files
from sessions.synth import make_model
from tests.bench.state_thinning import PARAMS, TEXT, thinning
from tests.threads import TEST_THREADS

from .test_exactness import engine_for, flat

pytestmark = pytest.mark.engine
TEST_PARAMS = dataclasses.replace(PARAMS, n_threads=TEST_THREADS)
"""The benchmark's context with the tests' threads (``tests.threads``: two threads of a test
worker that shares its cores spin against the other workers for many times the work)."""


def test_a_quarter_of_the_states_keeps_every_edit_within_four_spacings(tmp_path):
    """``tests.bench.state_thinning`` on the tiny qwen35 (its figures at a real state shape:
    docs/benchmarks.md)."""
    run = thinning(make_model("qwen35", "tiny"), tmp_path, params=TEST_PARAMS)
    assert run["states"] >= 12
    assert 0 < run["states_kept"] <= run["states"] // 3
    for edit in run["edits"]:
        assert edit["redecoded"] <= 4 * run["spacing"], edit
        assert edit["redecoded"] < run["message_ends"][-1] // 2, edit  # never the whole chat again
    assert run["within_bound"]


def test_states_inside_a_message_follow_the_spacing_not_the_clock(tmp_path):
    """A long message keeps a state only where this model's spacing calls for one, however
    cheap the clock says reading one more would be (a tiny model's are all cheap)."""
    from sessions.llama.model import LlamaModel

    class Wide(SnapshotPolicy):
        def state_spacing(self, state_bytes: int, kv_bytes_per_token: float, seconds_per_token: float | None) -> int:
            return 4 * RECURRENT_SPACING

    model = LlamaModel(make_model("qwen35", "tiny"))
    try:
        msgs = [model.tokenize(TEXT * 200, add_bos=True)[:2600], model.tokenize(TEXT, add_bos=False)[:20]]
        tokens, ends = flat(msgs)
        with CheckpointStore(tmp_path, ram_bytes=1 << 28, disk_bytes=1 << 32) as store:
            engine = engine_for(model, store, policy=Wide(), params=TEST_PARAMS)
            engine.prepare(tokens, ends)
            assert engine.captures.spacing == 4 * RECURRENT_SPACING
            assert store.flush(60)
            engine.ctx.close()
        states = sorted(f.end for f in list_files(tmp_path) if f.key[2] == "snapshot")
        inner = [end for end in states if end not in ends]
        assert inner, states  # the bound needs some inside the long message
        assert all(b - a <= 4 * RECURRENT_SPACING for a, b in zip([0, *states], states, strict=False)), states
        assert len(inner) <= ends[0] // (4 * RECURRENT_SPACING) + 1, states  # not one at every cut (256)
    finally:
        model.close()
