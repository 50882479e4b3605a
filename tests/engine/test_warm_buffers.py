"""The supply of touched buffers that window and recurrent snapshots are read into."""

from __future__ import annotations

import numpy as np

from sessions.engine.warm_buffers import WarmBuffers


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


def test_another_size_drops_the_ready_buffers():
    pool = WarmBuffers(keep=1)
    try:
        pool.take(1 << 20)
        pool.refill()
        wait_ready(pool, 1)
        assert len(pool.take(2 << 20)) == 2 << 20  # the 1 MB one does not fit
        assert pool.misses == 2 and pool._ready == []
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
    thread = pool._thread
    assert thread is not None
    pool.close()
    assert not thread.is_alive()
    assert len(pool.take(1 << 16)) == 1 << 16
    pool.refill()  # no helper is started again
    assert pool._thread is None
