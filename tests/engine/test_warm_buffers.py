"""The supply of touched buffers that window and recurrent snapshots are read into."""

from __future__ import annotations

import numpy as np
import pytest

from sessions.checkpoints import CheckpointStore
from sessions.llama.layout_check import layout_problem
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


def wait_ready_once(pool: WarmBuffers, count: int) -> None:
    with pool._cond:
        assert pool._cond.wait_for(lambda: len(pool._ready_once) >= count, timeout=30)


@pytest.fixture
def pool():
    pool = WarmBuffers()
    yield pool
    pool.close()


def test_a_buffer_asked_for_once_is_touched_when_a_decode_nears_its_position(pool):
    pool.expect(1 << 16)
    pool.expect_once(3 << 20, at=300)
    pool.expect_once(5 << 20, at=200)
    pool.refill(100)  # neither is near yet: only the size that repeats is touched
    wait_ready(pool, 2)
    assert pool._once == [(200, 5 << 20), (300, 3 << 20)] and pool._ready_once == []
    pool.refill(250)
    wait_ready_once(pool, 1)
    assert [len(b) for b in pool._ready_once] == [5 << 20] and pool._once == [(300, 3 << 20)]
    taken = pool.take(5 << 20, once=True)
    assert len(taken) == 5 << 20 and not taken.any() and pool.hits == 1
    assert pool._size == 1 << 16  # a size asked for once does not become the one that repeats
    assert len(pool._ready) == 2
    pool.refill(50)  # a decode after a cut back: what lies further on waits again
    assert pool._next_size() is None and pool._once == [(300, 3 << 20)]


def test_a_take_before_its_buffer_is_touched_is_a_miss_and_the_buffer_is_not_touched_after(pool):
    pool.expect_once(2 << 20, at=100)
    assert len(pool.take(2 << 20, once=True)) == 2 << 20 and pool.misses == 1
    assert pool._once == []
    pool.refill(1000)
    assert pool._pages.thread is None  # nothing left to touch: no helper started


def test_forgetting_drops_the_buffers_asked_for_once_ready_or_not(pool):
    pool.expect_once(1 << 20, at=10)
    pool.expect_once(1 << 20, at=900)
    pool.refill(10)
    wait_ready_once(pool, 1)
    pool.forget_once()
    assert pool._once == [] and pool._ready_once == []
    assert len(pool.take(1 << 20, once=True)) == 1 << 20 and pool.misses == 1


@pytest.mark.parametrize("arch", ["lfm2", "mamba"])
def test_a_prefill_sizes_the_buffers_before_its_first_snapshot(loaded_models, tmp_path, arch):
    """Before the first decode of a model with a recurrent state, the supply is sized to hold it."""
    model = loaded_models[arch]
    with CheckpointStore(tmp_path / "ck", ram_bytes=64 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store)
        assert engine.ring is None
        tokens = flat(branch(model, 0, 1, 2, 3, 4, 5))[0]
        engine.ctx.decode(tokens[:1], 0)
        engine.live = tokens[:1]
        engine.captures.before_decode(9)
        estimate = engine.ctx.warm._size
        engine.ctx.decode(tokens[1:9], 1)
        flags = FLAGS_FULL if engine.kind is MemoryKind.RECURRENT else FLAGS_PARTIAL  # a hybrid's state alone
        assert estimate == engine.ctx.state_size(LIVE, flags)  # a recurrent state has its size from the first token
        engine.ctx.close()


@pytest.mark.parametrize("checked", [True, False], ids=["after-the-layout-check", "without-it"])
@pytest.mark.parametrize("arch", ["gemma3", "gemma4", "gpt-oss"])
def test_the_pieces_a_prefill_reads_on_its_path_were_asked_for_ahead_at_their_size(loaded_models, tmp_path, checked,
                                                                                     arch):
    """A prompt longer than the ring overwrites the pieces of its first segments: each is
    read at its segment's end, into a buffer asked for a batch or more before, of exactly
    its size, and kept as read: the store holds that very buffer, with no copy. Sizes come
    from the window the layout check read when the context was made; without it, from the
    first batch, so that batch's piece is the one read into new memory."""
    model = loaded_models[arch]
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store)
        assert engine.ring is not None
        if checked:
            assert layout_problem(engine.ctx, engine.kind) is None and engine.ctx.checked_window_shape is not None
        warm, asked, read = engine.ctx.warm, [], []
        expect_once, take = warm.expect_once, warm.take

        def recording_expect(size, at):
            asked.append((at, size))
            expect_once(size, at)

        def recording_take(size, *, once=False):
            buf = take(size, once=once)
            if once:
                read.append((len(engine.seq.tokens), buf))
            return buf

        warm.expect_once, warm.take = recording_expect, recording_take
        text = model.tokenize("the sea and the boats and the stars above the water " * 200)
        msgs = [text[i : i + 90] for i in range(0, engine.ring.size + 400, 90)]
        tokens, ends = flat(msgs)
        engine.prepare(tokens, ends, reply_follows=True)
        assert len(read) >= 3
        # Every piece of the prompt asked for was read, at the size asked (none in vain:
        # those asked for past its end may be read while the reply is written); every
        # piece read was asked for but, without the check, one read before any size was known.
        asked_here = {(at, size) for at, size in asked if at < len(tokens)}
        reads = [(end, len(buf)) for end, buf in read]
        assert asked_here <= set(reads)
        unasked = [r for r in reads if r not in asked_here]
        assert unasked == ([] if checked else unasked[:1]) and unasked[:1] in ([], reads[:1])
        kept = {id(s.state.base if s.state.base is not None else s.state) for s in engine.captures.snapshots
                if s.state is not None}
        assert all(id(buf.base if buf.base is not None else buf) in kept for _end, buf in read)
        engine.captures.flush()
        assert warm._once == [] and warm._ready_once == []
        engine.ctx.close()
