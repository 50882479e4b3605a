"""Recurrent states under a disk budget: thinned evenly, never down to a full re-process.

A hybrid model's recurrent state can be far larger than the attention cells of the tokens
between two of them (Granite-H, Qwen3.5: tens to hundreds of MB a state). With the disk
budget at the cells plus a quarter of what the states want, the disk tier keeps a state
every few, evenly (``disk_index``: the state nearest the one before it goes first), so
after a reopen an edit anywhere in the chat re-decodes at most four times the spacing of
states, and always exactly.
"""

from __future__ import annotations

import pytest

from sessions.branching.snapshot_policy import RECURRENT_SPACING, SnapshotPolicy
from sessions.checkpoints import CheckpointStore
from sessions.checkpoints.listing import list_files
from sessions.llama.context import ContextParams
from sessions.synth import make_model

from .test_exactness import check, engine_for, flat

pytestmark = pytest.mark.engine

PARAMS = ContextParams(n_ctx=8192, n_batch=64, n_threads=2)
TEXT = "the sea and the boats and the stars above the water, and a lighthouse by the shore "
SIZES = [2, 9, 3, 40, 5, 12, 30, 4, 6, 40, 5, 30]
"""Message lengths in sentences: short turns and long ones (several spacings of states)."""


def messages(model) -> list[list[int]]:
    return [model.tokenize(TEXT * n, add_bos=(i == 0))[: 16 * n] for i, n in enumerate(SIZES)]


def test_a_quarter_of_the_states_keeps_every_edit_within_four_spacings(tmp_path):
    from sessions.llama.model import LlamaModel

    model = LlamaModel(make_model("qwen35", "tiny"))
    try:
        msgs = messages(model)
        tokens, ends = flat(msgs)
        whole = tmp_path / "whole"
        with CheckpointStore(whole, ram_bytes=1 << 28, disk_bytes=1 << 32) as store:
            engine = engine_for(model, store, params=PARAMS)
            engine.prepare(tokens, ends)
            spacing = engine.captures.spacing
            assert store.flush(60)
            engine.ctx.close()
        files = list_files(whole, headers=False)
        cells = sum(f.size for f in files if f.key[2] == "cells")
        states = [f for f in files if f.key[2] == "snapshot"]
        assert len(states) >= 12
        budget = cells + sum(f.size for f in states) // 4
        tight = tmp_path / "tight"
        with CheckpointStore(tight, ram_bytes=1 << 28, disk_bytes=budget) as store:
            engine = engine_for(model, store, params=PARAMS)
            engine.prepare(tokens, ends)
            assert store.flush(60)
            engine.ctx.close()
        kept = [f for f in list_files(tight, headers=False) if f.key[2] == "snapshot"]
        assert 0 < len(kept) <= len(states) // 3
        question = model.tokenize(" a new question about birds", add_bos=False)
        # A reopen: all from disk. Each edit writes checkpoints of its own; the budget has
        # room for them, so that they do not push out (as they would at the tight budget,
        # when the writer gets to it) the states the edits after them are to start from.
        with CheckpointStore(tight, ram_bytes=1 << 28, disk_bytes=2 * budget) as store:
            engine = engine_for(model, store, params=PARAMS)
            for k in (3, 8, 9, 10):  # an edit of message k, each alone in a new context
                engine._reset()
                edited = msgs[:k] + [question]
                result = check(engine, model, edited) if k == 9 else engine.prepare(*flat(edited))
                redecoded = result.tokens_evaluated - len(question)
                assert redecoded <= 4 * spacing, (k, redecoded, spacing)
                assert redecoded < ends[-1] // 2  # never the whole chat again
            engine.ctx.close()
    finally:
        model.close()


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
            engine = engine_for(model, store, policy=Wide(), params=PARAMS)
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
