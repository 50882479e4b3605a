"""The layouts of a model's states, learnt from its files once it is loaded (``learn_layouts``).

A restore that knows them reads its first files with no probing reads first; what it
learns must be exactly what a restore would have learnt, only ever from a file that
passed its checksum, and learning must not count as a use of the file.
"""

from __future__ import annotations

import pytest

from sessions.branching import restore_reads
from sessions.checkpoints import CheckpointStore
from sessions.checkpoints.file_format import HEADER_SIZE
from sessions.engine.chat_engine import LlamaChatEngine
from sessions.llama.context import ContextParams
from sessions.llama.state_blob import StateLayout
from sessions.memory_kind import MemoryKind

from .conftest import ARCHS
from .test_exactness import branch, check, engine_for, flat
from .test_restore_reads import BUDGET, save


def files(folder, suffix: str) -> list:
    return sorted(folder.rglob(f"*{suffix}"), key=lambda path: path.stat().st_size)


@pytest.mark.parametrize("arch", ARCHS)
def test_layouts_learnt_ahead_are_those_a_restore_learns(loaded_models, tmp_path, arch, monkeypatch):
    """Learnt ahead, the layouts are the ones the restore would have probed; the restore then
    probes nothing, stays exact, and the files keep their last use."""
    model = loaded_models[arch]
    msgs = branch(model, 0, 1, 2, 3, 4)
    save(model, tmp_path / "ck", msgs)
    with CheckpointStore(tmp_path / "ck", **BUDGET) as store:
        probed = engine_for(model, store)
        check(probed, model, msgs + branch(model, 5))
    times = {path: path.stat().st_mtime_ns for path in (tmp_path / "ck").rglob("*.*")}
    with CheckpointStore(tmp_path / "ck", **BUDGET) as store:
        engine = engine_for(model, store)
        restore_reads.learn_layouts(engine)
        assert {path: path.stat().st_mtime_ns for path in times} == times  # not counted as a use
        if arch == "mamba":  # recurrent: a whole state per snapshot, no cells, no window
            assert engine.cells_shape is None and engine.ring is None
            return
        assert engine.cells_shape is not None and engine.cells_shape == probed.cells_shape
        if engine.ring is not None:
            assert probed.ring is not None and probed.ring.window_shape is not None
            assert engine.ring.window_shape == probed.ring.window_shape

        def no_probe(*_args):
            raise AssertionError("a layout was probed although it was known")

        monkeypatch.setattr(StateLayout, "probe_shape", no_probe)
        result = check(engine, model, msgs + branch(model, 5))
        assert result.tokens_restored >= len(flat(msgs)[0])  # restored from files, not decoded


@pytest.mark.parametrize("kind", ["cells", "window"])
def test_a_damaged_file_teaches_nothing(loaded_models, tmp_path, kind):
    """The smallest file is the one read; damaged, it is reported and deleted, and the layout
    is left for the first restore to learn from a file that checks out."""
    model = loaded_models["gemma3"]
    msgs = branch(model, 0, 1, 2, 3, 4)
    save(model, tmp_path / "ck", msgs)
    found = files(tmp_path / "ck", ".ckpt" if kind == "cells" else ".snap")
    smallest = min(found, key=lambda path: (path.stat().st_size, path.name.split("-")[1]))  # as ``sample`` picks
    data = bytearray(smallest.read_bytes())
    data[HEADER_SIZE + (len(data) - HEADER_SIZE) // 2] ^= 0x40
    smallest.write_bytes(bytes(data))
    problems: list[str] = []
    with CheckpointStore(tmp_path / "ck", **BUDGET, on_problem=problems.append) as store:
        engine = engine_for(model, store)
        assert engine.ring is not None
        restore_reads.learn_layouts(engine)
        learnt = engine.cells_shape if kind == "cells" else engine.ring.window_shape
        other = engine.ring.window_shape if kind == "cells" else engine.cells_shape
        assert learnt is None and other is not None
        assert not smallest.exists()
        assert len(problems) == 1 and smallest.name in problems[0] and "checksum mismatch" in problems[0]
        check(engine, model, msgs + branch(model, 5))  # exact all the same
        assert (engine.cells_shape if kind == "cells" else engine.ring.window_shape) is not None


def test_an_engine_learns_them_as_it_starts(model_paths, tmp_path):
    """``LlamaChatEngine`` learns the layouts on its checkpoint reader before any restore."""
    params = ContextParams(n_ctx=2048, n_batch=64, n_threads=1)
    with CheckpointStore(tmp_path / "ck", **BUDGET) as store:
        first = LlamaChatEngine(model_paths["gemma3"], params, checkpoints=store)
        try:
            assert first.info.kind is MemoryKind.SWA
            msgs = branch(first.model, 0, 1, 2, 3)
            first.prepare(*flat(msgs), need_logits=False)
            assert store.flush(30)
        finally:
            first.close()
        engine = LlamaChatEngine(model_paths["gemma3"], params, checkpoints=store)
        try:
            engine.ctx.restore_memory.reader().submit(int).result(30)  # after the learning, in its queue
            assert engine.branches.cells_shape is not None
            assert engine.branches.ring is not None and engine.branches.ring.window_shape is not None
        finally:
            engine.close()


def test_no_store_or_no_files_teach_nothing(loaded_models, tmp_path):
    model = loaded_models["gemma3"]
    with CheckpointStore(tmp_path / "empty", **BUDGET) as empty:
        for store in (None, empty):
            engine = engine_for(model, store)
            restore_reads.learn_layouts(engine)
            assert engine.cells_shape is None
            assert engine.ring is not None and engine.ring.window_shape is None


def test_files_too_large_to_read_at_load_are_left_to_the_restore(loaded_models, tmp_path, monkeypatch):
    """A large model's window file is hundreds of MB: not read at load, learnt by the restore."""
    model = loaded_models["gemma3"]
    msgs = branch(model, 0, 1, 2, 3, 4)
    save(model, tmp_path / "ck", msgs)
    window = files(tmp_path / "ck", ".snap")[0].stat().st_size
    assert files(tmp_path / "ck", ".ckpt")[0].stat().st_size < window
    monkeypatch.setattr(restore_reads, "LEARN_FROM_AT_MOST", window - 1)
    with CheckpointStore(tmp_path / "ck", **BUDGET) as store:
        engine = engine_for(model, store)
        assert engine.ring is not None
        restore_reads.learn_layouts(engine)
        assert engine.cells_shape is not None and engine.ring.window_shape is None
        check(engine, model, msgs + branch(model, 5))
        assert engine.ring.window_shape is not None
