"""Memory for the state reads a decode cannot put off, with its pages already mapped.

A new buffer's pages are mapped on first write, one page fault per 4 KB. On some
machines (virtual ones especially) that costs more than the copy itself: a copy into
new memory runs at a fifteenth of one into touched memory (``docs/benchmarks.md``,
"What the engine's choices rest on"). Two kinds of snapshot must be read while a
prefill runs, and each gets memory touched ahead:

- a recurrent state (the next token overwrites it) has one size per model, so a helper
  thread keeps a buffer or two of that size ready (``expect``);
- a sliding window's piece that the ring is about to overwrite has its segment's size,
  known exactly before the decode that reaches it (``expect_once``): each is touched
  once, during the batches before it is read.

Either way the buffer taken is the caller's to keep: the snapshot goes to the store
without another copy.

The helper starts touching when the next ``llama_decode`` starts (``refill``), not when a
buffer is taken: then the decode loop's own work between two batches has the cores to
itself. The touching runs on the context's one page-touching thread (``page_touching``,
shared with the restore memory), in ``ctypes.memset``, which releases the GIL: on a machine
with free cores (any GPU machine) it costs nothing; on a busy CPU it takes a few
milliseconds from a decode that lasts a second (at the lowest priority it only waited
longer, for no gain).
"""

from __future__ import annotations

import bisect
import threading
import time

import numpy as np

from sessions.llama.page_touching import PageToucher, touched

BIG = 64 << 20
"""Above this, one buffer is kept ready instead of two (a recurrent state of a large
hybrid model can be that size, and idle memory should stay small)."""


class WarmBuffers:
    """Touched buffers, touched by ``pages``: of the size last asked for (``expect``), and
    once each of the sizes asked for ahead (``expect_once``)."""

    def __init__(self, pages: PageToucher | None = None, *, keep: int = 2) -> None:
        self._pages = pages or PageToucher()
        self._own_pages = pages is None
        """Closed with these buffers only when made for them (a context's is shared)."""
        self.keep = keep
        self.background_seconds = 0.0
        """Time the helper thread spent touching pages (off the decode's path)."""
        self.hits = 0
        self.misses = 0
        self._ready: list[np.ndarray] = []
        self._size = 0
        self._once: list[tuple[int, int]] = []
        """Buffers asked for once, not touched yet: (position, size), by position."""
        self._ready_once: list[np.ndarray] = []
        self._upto = 0
        """Touch the buffers asked for once up to this position (the last ``refill``'s)."""
        self._epoch = 0
        """Counts ``forget_once``: a buffer touched for an expectation forgotten meanwhile is dropped."""
        self._cond = threading.Condition()
        self._filling = False
        """A fill is given to the page toucher and has not ended."""
        self._closed = False

    def take(self, size: int, *, once: bool = False) -> np.ndarray:
        """A buffer of ``size`` bytes: a touched one when ready, else a new one.

        ``once``: one asked for by ``expect_once``, whose size does not repeat (it never
        changes the size ``expect`` set).
        """
        with self._cond:
            if once:
                pool = self._ready_once
                self._drop_once(size)
            else:
                self._resize(size)
                pool = self._ready
            at = next((i for i, buf in enumerate(pool) if _serves(len(buf), size)), None)
            buf = pool.pop(at) if at is not None else None
            if buf is None:
                self.misses += 1
            else:
                self.hits += 1
        return buf[:size] if buf is not None else np.empty(size, dtype=np.uint8)

    def expect(self, size: int) -> None:
        """Buffers of up to ``size`` bytes will be taken: the next ``refill`` touches some.

        An estimate may be a little larger than what is then taken: ``take`` hands out
        the start of a larger ready buffer, and touches buffers of the size taken from
        then on.
        """
        with self._cond:
            self._resize(size)

    def expect_once(self, size: int, at: int) -> None:
        """A buffer of ``size`` bytes will be taken once (``take(once=True)``) when the live
        sequence reaches position ``at``: a ``refill`` whose decode reaches near it touches one."""
        with self._cond:
            bisect.insort(self._once, (at, size))

    def forget_once(self) -> None:
        """Drop what was asked for once and not taken (the reads it was for are done, or
        will not happen: a prefill stopped, a piece found kept)."""
        with self._cond:
            self._once.clear()
            self._ready_once.clear()
            self._epoch += 1

    def _drop_once(self, size: int) -> None:
        """A take of ``size`` asked for once came before its buffer was touched: touch it no more."""
        if not any(_serves(len(buf), size) for buf in self._ready_once):
            at = next((i for i, (_p, s) in enumerate(self._once) if s == size), None)
            if at is not None:
                del self._once[at]

    def _resize(self, size: int) -> None:
        """Touch buffers of ``size`` from now on, and keep the ready ones that serve it."""
        self._ready = [buf for buf in self._ready if _serves(len(buf), size)]
        self._size = size

    def refill(self, upto: int = 0) -> None:
        """Let the helper touch what was taken (cheap when nothing was), and the buffers
        asked for once for positions up to ``upto``."""
        with self._cond:
            self._upto = upto  # (a decode after a cut or a restore starts lower again)
            if not self._closed and not self._filling and self._next_size() is not None:
                self._filling = self._pages.submit(self._fill)

    def _next_size(self) -> int | None:
        """What the helper touches next, under the lock: a buffer asked for once before one
        of the size that repeats (None: nothing is wanted)."""
        if self._closed:
            return None
        if self._once_due():
            return self._once[0][1]
        return self._size if self._repeat_wanted() else None

    def _once_due(self) -> bool:
        return bool(self._once) and self._once[0][0] <= self._upto

    def _repeat_wanted(self) -> bool:
        keep = 1 if self._size > BIG else self.keep
        return bool(self._size) and len(self._ready) < keep

    def _fill(self) -> None:
        """On the page toucher: touch buffers until none is wanted."""
        while True:
            with self._cond:
                size, epoch = self._next_size(), self._epoch
                if size is None:
                    self._filling = False
                    return
                once = self._once_due()
                if once:
                    del self._once[0]
            t0 = time.perf_counter()
            buf = touched(size)
            with self._cond:
                self.background_seconds += time.perf_counter() - t0
                if once:
                    if epoch == self._epoch and not self._closed:
                        self._ready_once.append(buf)
                elif _serves(size, self._size) and self._repeat_wanted() and not self._closed:
                    self._ready.append(buf)
                self._cond.notify_all()  # for whoever waits for a ready buffer

    def close(self, wait: bool = True) -> None:
        """Touch no more and let the buffers go; the page toucher too when it was made
        for these buffers (``wait``: for its thread to end)."""
        with self._cond:
            self._closed = True
            self._ready.clear()
            self._once.clear()
            self._ready_once.clear()
            self._cond.notify_all()
        if self._own_pages:
            self._pages.close(wait)


def _serves(buffer: int, size: int) -> bool:
    """Whether a buffer of ``buffer`` bytes may be handed out for ``size``: large enough,
    and less than twice that (the slice handed out keeps the whole buffer alive)."""
    return size <= buffer < 2 * size
