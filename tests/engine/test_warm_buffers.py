"""The supply of touched buffers that window and recurrent snapshots are read into."""

from __future__ import annotations

import numpy as np
import pytest

from sessions.checkpoints import CheckpointStore
from sessions.llama.sequences import LIVE
from sessions.llama.state_blob import FLAGS_FULL, FLAGS_PARTIAL
from sessions.llama.warm_buffers import WarmBuffers
from sessions.memory_kind import MemoryKind

from .test_exactness import branch, engine_for, flat


def wait_ready(pool: WarmBuffers, count: int) -> None:
    """Wait (on the pool's own condition) until ``count`` buffers are ready."""
    with pool._cond:
        assert pool._cond.wait_for(lambda: len(pool._ready) >= count, timeout=30)


def test_a_taken_size_is_refilled_with_touched_buffers_of_that_size():
    pool = WarmBuffers(keep=2)
    try:
        first = pool.take(3 << 20)
        assert len(first) == 3 << 20 and pool.misses == 1  # nothing was ready yet
        pool.refill()
        wait_ready(pool, 2)
        second = pool.take(3 << 20)
        assert len(second) == 3 << 20 and pool.hits == 1
        assert not np.shares_memory(first, second)
        assert not second.any()  # touched with zeros
        assert pool.background_seconds > 0
    finally:
        pool.close()


@pytest.mark.parametrize(
    ("ready", "taken", "served"),
    [
        (2 << 20, 2 << 20, True),  # the size expected
        (3 << 20, 2 << 20, True),  # an estimate on the large side serves
        (1 << 20, 2 << 20, False),  # too small
        (4 << 20, 1 << 20, False),  # four times too large: a slice keeps its whole buffer alive
    ],
)
def test_ready_buffers_serve_takes_of_their_size_or_a_little_less(ready, taken, served):
    pool = WarmBuffers(keep=1)
    try:
        pool.expect(ready)
        pool.refill()
        wait_ready(pool, 1)
        assert len(pool.take(taken)) == taken
        assert (pool.hits, pool.misses) == ((1, 0) if served else (0, 1))
        assert pool._ready == [] and pool._size == taken  # touched at the size taken from now on
    finally:
        pool.close()


def test_taken_buffers_are_never_handed_out_twice():
    pool = WarmBuffers(keep=2)
    try:
        seen = []
        for _ in range(6):
            buf = pool.take(1 << 16)
            buf[:] = len(seen) + 1  # a buffer handed out twice would show another's mark
            seen.append(buf)
            pool.refill()
            wait_ready(pool, 2)
        assert [int(b[0]) for b in seen] == list(range(1, 7))
        assert all(int(b.min()) == int(b.max()) for b in seen)
    finally:
        pool.close()


def test_close_stops_the_helper_and_later_takes_still_work():
    pool = WarmBuffers()
    pool.take(1 << 16)
    pool.refill()
    thread = pool._pages.thread
    assert thread is not None
    pool.close()
    assert not thread.is_alive()
    assert len(pool.take(1 << 16)) == 1 << 16
    pool.refill()  # no helper is started again
    assert pool._pages.thread is None


def test_a_shared_page_toucher_fills_the_buffers_after_the_work_given_before_and_outlives_them():
    """A context's warm buffers and restore memory share one thread: the buffers are
    touched in turn with the restore memory's preparation, and closing the buffers leaves
    the thread to its owner."""
    import threading

    from sessions.llama.restore_memory import RestoreMemory

    memory = RestoreMemory()
    pool = WarmBuffers(memory.pages, keep=1)
    release, seen = threading.Event(), []

    def sizes():
        assert release.wait(30)
        return {"ring": 1 << 16}

    memory.prepare(sizes)  # holds the one thread until released
    pool.expect(1 << 16)
    pool.refill()
    assert pool._ready == []  # waits its turn behind the preparation
    release.set()
    wait_ready(pool, 1)
    assert len(memory._buffers["ring"]) == 1 << 16  # the preparation ran first
    thread = memory.pages.thread
    pool.close()
    ran = threading.Event()
    assert memory.pages.submit(lambda: (seen.append(threading.current_thread()), ran.set()))
    assert ran.wait(30) and seen == [thread]  # still running, for the restore memory
    memory.close()
    assert not thread.is_alive()


@pytest.mark.parametrize("arch", ["gemma3", "lfm2", "mamba"])
def test_a_prefill_sizes_the_buffers_before_its_first_snapshot(loaded_models, tmp_path, arch):
    """Before the decode that makes a snapshot whole, the supply is sized to hold it."""
    model = loaded_models[arch]
    with CheckpointStore(tmp_path / "ck", ram_bytes=64 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store)
        flags = FLAGS_PARTIAL if engine.kind is not MemoryKind.RECURRENT else FLAGS_FULL
        tokens = flat(branch(model, 0, 1, 2, 3, 4, 5))[0]
        whole = engine.n_swa if engine.ring is not None else 1
        first = max(1, whole // 2)
        engine.ctx.decode(tokens[:first], 0)
        engine.live = tokens[:first]
        engine.captures.before_decode(whole + 8)
        estimate = engine.ctx.warm._size
        engine.ctx.decode(tokens[first : whole + 8], first)
        engine.live = tokens[: whole + 8]
        size = engine.ctx.state_size(LIVE, flags)
        if engine.ring is None:
            assert estimate == size  # a recurrent state has its size from the first token
        else:
            assert size <= estimate < 1.1 * size
            engine.captures.before_decode(whole + 9)  # whole now: measured, exact
            assert engine.ctx.warm._size == size
        engine.ctx.close()
