"""The buffers restores write into: kept between restores, touched ahead of the first."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from sessions.llama import restore_memory
from sessions.llama.restore_memory import RestoreMemory

REPO = Path(__file__).resolve().parents[2]


def test_a_buffer_is_kept_and_handed_out_again_while_large_enough():
    memory = RestoreMemory()
    first = memory.get("join0", 1 << 20)
    first[:] = 7
    again = memory.get("join0", 1 << 19)
    assert len(again) == 1 << 19 and np.shares_memory(first, again) and again.all()
    larger = memory.get("join0", 2 << 20)
    assert len(larger) == 2 << 20 and not np.shares_memory(first, larger) and not larger.any()
    assert np.shares_memory(memory.get("join0", 10), larger)
    assert not np.shares_memory(memory.get("join1", 10), larger)  # names are apart
    memory.close()


def test_a_buffer_larger_than_keep_is_made_for_one_use(monkeypatch):
    monkeypatch.setattr(restore_memory, "KEEP", 1 << 16)
    memory = RestoreMemory()
    big = memory.get("ring", 1 << 17)
    assert len(big) == 1 << 17 and not np.shares_memory(big, memory.get("ring", 1 << 17))
    memory.close()


def test_prepare_touches_the_buffers_on_a_helper_thread_and_get_waits_for_it(monkeypatch):
    memory = RestoreMemory()
    asked, touching, release = threading.Event(), threading.Event(), threading.Event()
    made: list[int] = []
    plain = restore_memory.touched

    def sizes():
        asked.set()
        return {"ring": 1 << 20, "none": 0}

    def slow_touched(size):
        made.append(size)
        touching.set()
        assert release.wait(30)
        return plain(size)

    monkeypatch.setattr(restore_memory, "touched", slow_touched)
    memory.prepare(sizes)
    assert asked.wait(30) and touching.wait(30)  # the helper is touching "ring" now
    got: list[np.ndarray] = []
    getter = threading.Thread(target=lambda: got.append(memory.get("ring", 1 << 19)))
    getter.start()
    release.set()
    getter.join(30)
    assert made == [1 << 20]  # ``get`` waited for the helper's buffer instead of making one
    assert len(got[0]) == 1 << 19 and np.shares_memory(got[0], memory._buffers["ring"]) and not got[0].any()
    assert "none" not in memory._buffers
    memory.close()


def test_a_dropped_buffer_comes_back_zeroed():
    memory = RestoreMemory()
    memory.get("ring", 64)[:] = 7
    assert memory.get("ring", 64).all()  # kept, with what its last user left
    memory.drop("ring")
    memory.drop("never-made")
    assert not memory.get("ring", 64).any()


def test_a_prepare_whose_sizes_fail_leaves_nothing_behind():
    memory = RestoreMemory()

    def sizes():
        raise RuntimeError("the store was closed")

    memory.prepare(sizes)
    memory.close()  # joins the page toucher
    assert memory._buffers == {} and len(memory.get("join0", 100)) == 100


@pytest.mark.parametrize("arch", ["gemma3", "lfm2"])
def test_an_engine_touches_what_a_restore_of_its_checkpoints_needs_while_it_loads(model_paths, tmp_path, arch):
    """Buffers for the join and the snapshot, sized from the files on disk: a sliding window
    is read straight into the ring, other snapshots into a buffer of their own."""
    from sessions.branching.restore_reads import BATCH_BYTES, JOIN_BUFFERS
    from sessions.checkpoints import CheckpointStore
    from sessions.engine.chat_engine import LlamaChatEngine
    from sessions.llama.context import ContextParams

    params = ContextParams(n_ctx=2048, n_batch=64, n_threads=1)
    text = "the sea and the boats and the stars above the water " * 12
    with CheckpointStore(tmp_path / "ck", ram_bytes=1 << 28, disk_bytes=1 << 30) as store:
        first = LlamaChatEngine(model_paths[arch], params, checkpoints=store)
        tokens = first.tokenize(text, add_bos=True)
        first.prepare(tokens, [len(tokens) // 2, len(tokens)])
        first.close()
        assert store.flush(30)
        model = first.info.fingerprint
        cells, snapshot = store.largest(model, "cells"), store.largest(model, "snapshot")
        assert cells > 0 and snapshot > 0
        second = LlamaChatEngine(model_paths[arch], params, checkpoints=store)
        memory = second.ctx.restore_memory
        touched_all = threading.Event()
        assert memory.pages.submit(touched_all.set)  # runs after the preparations, on the same thread
        assert touched_all.wait(30)
        sizes = {name: len(buf) for name, buf in memory._buffers.items()}
        joins = {f"join{i}": BATCH_BYTES + cells for i in range(JOIN_BUFFERS)}
        if arch == "gemma3":
            assert sizes == {**joins, "ring": sizes["ring"]}
            assert sizes["ring"] >= snapshot  # a ring holds more cells than a window
        else:
            assert sizes == {**joins, "snapshot": snapshot}
        second.close()


COLLECTED_INSIDE_THREADING = """
import gc, sys, threading
from sessions.llama.context import ContextParams, LlamaContext
from sessions.llama.model import LlamaModel

ctx = LlamaContext(LlamaModel(sys.argv[1]), ContextParams(n_ctx=256, n_batch=32))
ctx.restore_memory.reader()  # the checkpoint reader's thread runs (not a daemon)
ctx.warm.expect(1 << 16)
ctx.warm.refill()  # and the warm buffers' helper
ctx.cycle = ctx  # only a collection frees it now
del ctx
# A thread starting up holds this lock while it tidies threading's records, and a
# collection can run there: the context's finaliser must not join a thread then.
with threading._shutdown_locks_lock:
    gc.collect()
print("collected")
"""


@pytest.mark.skipif(not hasattr(threading, "_shutdown_locks_lock"), reason="this Python starts threads otherwise")
def test_a_context_collected_inside_threadings_own_lock_does_not_wait_for_its_threads(model_paths):
    """A context in a reference cycle is freed by whichever thread collects next; once, in
    the test suite, that was a checkpoint reader starting up, and the finaliser's join of
    the old context's reader waited for a lock its own thread held, for good."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", COLLECTED_INSIDE_THREADING, str(model_paths["llama"])],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0 and done.stdout.strip() == "collected", done.stderr[-2000:]
