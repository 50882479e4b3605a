"""Restores read from disk in batches, beside the cells: every failure still ends exact.

The routes of ``test_exactness`` with what the reading adds: ranges in RAM and on disk
joined into one batch, a sliding window put in before the last cells, and a damaged
file that must not leave a wrong layout behind.
"""

from __future__ import annotations

import threading

import pytest

from sessions.branching import restore_reads
from sessions.branching.segments import segment_boundaries
from sessions.branching.swa_ring import SwaRing
from sessions.checkpoints import CheckpointStore, prefix_hash
from sessions.checkpoints.keys import address
from sessions.llama.context import LlamaContext
from sessions.llama.state_blob import FLAGS_FULL
from sessions.memory_kind import MemoryKind

from .conftest import ARCHS
from .test_exactness import branch, check, engine_for, flat, toks

BUDGET = dict(ram_bytes=256 << 20, disk_bytes=1 << 30)


def save(model, folder, *branches):
    """Each branch prepared through one engine, its checkpoints written to ``folder``;
    returns the engine's compat (what the files are filed under)."""
    with CheckpointStore(folder, **BUDGET) as store:
        engine = engine_for(model, store)
        for msgs in branches:
            engine.prepare(*flat(msgs))
        store.flush()
    return engine.compat


@pytest.mark.parametrize("batch_bytes", [1, 1 << 30], ids=["a-batch-per-range", "one-batch"])
@pytest.mark.parametrize("arch", ARCHS)
def test_restore_from_ram_and_disk_with_a_file_gone(loaded_models, tmp_path, arch, batch_bytes, monkeypatch):
    """Ranges in RAM and on disk join into the same batches; a file gone stops the restore there."""
    monkeypatch.setattr(restore_reads, "BATCH_BYTES", batch_bytes)
    model = loaded_models[arch]
    msgs = branch(model, 0, 1, 2, 3, 4)
    tokens, ends = flat(msgs)
    save(model, tmp_path / "ck", msgs)
    with CheckpointStore(tmp_path / "ck", **BUDGET) as second:
        engine = engine_for(model, second)
        plan = engine.plan(tokens + toks(model, 5), ends + [len(tokens) + len(toks(model, 5))])
        if engine.kind is MemoryKind.RECURRENT:
            assert plan.restore == ()  # a recurrent model restores one whole state, no ranges
            return
        assert len(plan.restore) == len(segment_boundaries(ends, engine.interval))  # every range saved
        prefixes = [prefix_hash(tokens[: info.end]) for info in plan.restore]
        assert second.get(engine.compat, prefixes[1]) is not None  # now in RAM
        (tmp_path / "ck" / address(engine.compat, prefixes[3])).unlink()
        result = check(engine, model, msgs + branch(model, 5))
        assert result.tokens_restored <= plan.restore[2].end  # nothing past the file that is gone
        assert result.tokens_restored + result.tokens_evaluated == len(tokens) + len(toks(model, 5))


@pytest.mark.parametrize("gone", [None, 3], ids=["all-there", "a-later-file-gone"])
def test_a_window_put_in_between_batches_of_cells(loaded_models, tmp_path, gone, monkeypatch):
    """The window goes in right after the first batch, the other cells after it: the same bits.

    Should a later range be gone, the cells stop short of that window: the branch is
    rebuilt, exactly, instead of kept with a window of another point.
    """
    monkeypatch.setattr(restore_reads, "BATCH_BYTES", 1)
    put: list[int] = []
    order: list[str] = []
    original = SwaRing.put_window
    monkeypatch.setattr(SwaRing, "put_window", lambda ring, laid: (put.append(laid.pos_max), order.append("window"),
                                                                   original(ring, laid)))
    state_write = LlamaContext.state_write
    monkeypatch.setattr(LlamaContext, "state_write", lambda ctx, blob, seq, flags=FLAGS_FULL: (
        flags == FLAGS_FULL and order.append("cells"), state_write(ctx, blob, seq, flags))[1])
    readers: dict[str, str] = {}  # what was read on which thread
    reads = restore_reads.RestoreReads
    read_batch, read_window = reads._read_batch, reads._read_window
    monkeypatch.setattr(reads, "_read_batch", lambda self, index: (
        readers.setdefault(f"batch {index}", threading.current_thread().name), read_batch(self, index))[1])
    monkeypatch.setattr(reads, "_read_window", lambda self, end, parts: (
        readers.setdefault("snapshot", threading.current_thread().name), read_window(self, end, parts))[1])
    model = loaded_models["gemma3"]
    msgs = branch(model, 0, 1, 2, 3, 4)
    tokens, ends = flat(msgs)
    save(model, tmp_path / "ck", msgs)
    with CheckpointStore(tmp_path / "ck", **BUDGET) as second:
        engine = engine_for(model, second)
        if gone is not None:
            prefix = prefix_hash(tokens[: ends[gone]])
            assert second.has(engine.compat, prefix)  # known to the store, so the plan counts on it
            (tmp_path / "ck" / address(engine.compat, prefix)).unlink()
        result = check(engine, model, msgs + branch(model, 5))
        assert put == [len(tokens) - 1]  # the window of the end of the cells, put in once
        assert order[:3] == ["cells", "window", "cells"]  # its copy overlaps the reading of the rest
        # The restoring thread reads the first batch while the helper reads the window.
        assert readers.pop("batch 0") == threading.current_thread().name
        assert {"snapshot", "batch 1"} <= readers.keys()
        assert all(name.startswith("checkpoint-read") for name in readers.values()), readers
        if gone is None:
            assert result.tokens_restored > 0 and result.tokens_evaluated == len(toks(model, 5))
        else:
            assert result.tokens_restored == 0  # rebuilt from token 0


def test_a_layout_learnt_from_a_damaged_file_is_not_kept(loaded_models, tmp_path):
    """The layout of cells files is learnt from the first one read, and kept only once that
    file passed its checksum: a damaged first file is reported, and spoils nothing after."""
    from sessions.checkpoints.file_format import HEADER_SIZE

    model = loaded_models["llama"]
    damaged, whole = branch(model, 0, 1, 2, 3), branch(model, 6, 1, 2, 3)
    compat = save(model, tmp_path / "ck", damaged, whole)
    tokens, ends = flat(damaged)
    path = tmp_path / "ck" / address(compat, prefix_hash(tokens[: ends[0]]))
    original = path.read_bytes()
    data = bytearray(original)
    data[HEADER_SIZE + 8 + 8 + 12 * ends[0] + 8] ^= 0x01  # the first layer's type: a layout that adds up
    path.write_bytes(bytes(data))
    problems: list[str] = []
    with CheckpointStore(tmp_path / "ck", **BUDGET, on_problem=problems.append) as second:
        engine = engine_for(model, second)
        assert check(engine, model, damaged).tokens_restored == 0
        assert engine.cells_shape is None
        assert len(problems) == 1 and path.name in problems[0] and "checksum mismatch" in problems[0]
        assert second.flush(30) and path.read_bytes() == original  # deleted, then saved again whole
        engine._reset()
        assert check(engine, model, whole + branch(model, 5)).tokens_restored > 0
        assert engine.cells_shape is not None


@pytest.mark.parametrize("damaged", [False, True], ids=["whole", "damaged"])
def test_a_window_file_read_straight_into_the_ring(loaded_models, tmp_path, damaged):
    """A window comes off disk into its ring cells (the layout is learnt from it). A damaged
    one is reported and its bytes leave the ring buffer with it; the branch stays exact."""
    from sessions.checkpoints.file_format import HEADER_SIZE

    model = loaded_models["gemma3"]
    msgs = branch(model, 0, 1, 2, 3, 4)
    tokens, _ends = flat(msgs)
    compat = save(model, tmp_path / "ck", msgs)
    path = tmp_path / "ck" / address(compat, prefix_hash(tokens), "snapshot")
    if damaged:
        data = bytearray(path.read_bytes())
        data[HEADER_SIZE + len(data) // 2] ^= 0x40  # inside a layer's rows
        path.write_bytes(bytes(data))
    problems: list[str] = []
    with CheckpointStore(tmp_path / "ck", **BUDGET, on_problem=problems.append) as second:
        engine = engine_for(model, second)
        assert engine.ring is not None
        dropped: list[str] = []
        memory = engine.ctx.restore_memory
        original = memory.drop
        memory.drop = lambda name: (dropped.append(name), original(name))  # type: ignore[method-assign]
        result = check(engine, model, msgs + branch(model, 5))
        if damaged:
            assert engine.ring.window_shape is None and dropped == ["ring"]
            assert len(problems) == 1 and path.name in problems[0] and "checksum mismatch" in problems[0]
            assert result.tokens_evaluated > len(toks(model, 5))  # the window's tokens decoded again
        else:
            assert engine.ring.window_shape is not None and dropped == [] and problems == []
            assert result.tokens_evaluated == len(toks(model, 5))
