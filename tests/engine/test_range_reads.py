"""Ranges read out together are byte for byte what each range read alone gives.

A hybrid's read of the spare sequence carries its whole recurrent state, so a prefill's
ranges are read in groups (``sessions.llama.range_reads``); the checkpoints must not
change by it, including when a restore has put the cells of a branch in other cells of
the cache than a run from token 0 would.
"""

from __future__ import annotations

import numpy as np
import pytest

from sessions.checkpoints import CheckpointStore
from sessions.llama import range_reads
from sessions.llama.layout_check import layout_problem
from sessions.llama.range_reads import read_ranges

from .test_exactness import branch, engine_for, flat


@pytest.mark.parametrize("checked", [True, False], ids=["after-the-layout-check", "without-it"])
@pytest.mark.parametrize("arch", ["llama", "lfm2", "qwen35", "granitehybrid"])
def test_ranges_read_together_are_those_read_one_by_one(loaded_models, tmp_path, arch, checked, monkeypatch):
    model = loaded_models[arch]
    with CheckpointStore(tmp_path / "ck", ram_bytes=64 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store)
        if checked:  # it knows a cell's bytes from the start
            assert layout_problem(engine.ctx, engine.kind) is None and engine.ctx.checked_cells_shape is not None
        first, ends = flat(branch(model, 0, 1, 2, 3))
        engine.prepare(first, ends)
        other, ends = flat(branch(model, 0, 1, 4, 5, 6))  # a switch: restored, then decoded on
        engine.prepare(other, ends)
        spans = [(0, ends[0]), (ends[0], ends[1]), (ends[1], ends[3]), (ends[3], ends[4]), (ends[4], ends[4])]
        alone = [engine.ctx.read_range(a, b) for a, b in spans]
        reads = []
        read = engine.ctx.state_read
        monkeypatch.setattr(engine.ctx, "state_read", lambda *a, **k: reads.append(1) or read(*a, **k))
        together = read_ranges(engine.ctx, spans)
        assert len(reads) == (1 if checked else 2)  # without the check, the first range alone, for a cell's size
        assert [bytes(t) for t in together] == [bytes(a) for a in alone]
        monkeypatch.setattr(range_reads, "GROUP_BYTES", 1)  # every range a group of its own
        reads.clear()
        assert [bytes(t) for t in read_ranges(engine.ctx, spans)] == [bytes(a) for a in alone]
        assert len(reads) == len(spans)
        engine.ctx.close()


def test_a_hybrid_prefill_reads_its_recurrent_state_once_for_all_its_ranges(loaded_models, tmp_path):
    """The read-out after a prefill of several messages copies out their cells and one
    recurrent state (besides the states kept at message ends), not one state per range."""
    model = loaded_models["qwen35"]
    with CheckpointStore(tmp_path / "ck", ram_bytes=64 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store)
        tokens, ends = flat(branch(model, 0, 1, 2, 3, 4, 5))
        engine.prepare(tokens, ends, reply_follows=True)
        ctx = engine.ctx
        state = ctx.state_size(0, 1)  # the recurrent part alone
        cells = len(read_ranges(ctx, [(0, len(tokens))])[0])
        before = ctx.bytes_read
        engine.captures.flush()
        read_out = ctx.bytes_read - before
        assert read_out < cells + 3 * state  # a state per range would be six
        assert np.all([store.has(engine.compat, p, "cells") for p in _prefixes(engine, tokens, ends)])
        ctx.close()


def _prefixes(engine, tokens, ends):
    from sessions.checkpoints import prefix_hash

    return [prefix_hash(tokens[:end]) for end in ends]
