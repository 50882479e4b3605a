"""Memory for the state reads a decode cannot put off, with its pages already mapped.

A new buffer's pages are mapped on first write, one page fault per 4 KB. On some
machines (virtual ones especially) that costs more than the copy itself, several times a
read into touched memory (``docs/benchmarks.md``, "What the engine's choices rest on").
The snapshots a prefill must read while it runs (a window the ring is about to
overwrite, a recurrent state the next token changes) have one size per model, so a
helper thread keeps a buffer or two of that size with every page touched, and the decode
loop takes one instead of allocating.

The helper starts touching when the next ``llama_decode`` starts (``refill``), not when a
buffer is taken: then the decode loop's own work between two batches has the cores to
itself. The touching runs on the context's one page-touching thread (``page_touching``,
shared with the restore memory), in ``ctypes.memset``, which releases the GIL: on a machine
with free cores (any GPU machine) it costs nothing; on a busy CPU it takes a few
milliseconds from a decode that lasts a second (at the lowest priority it only waited
longer, for no gain).
"""

from __future__ import annotations

import threading
import time

import numpy as np

from sessions.llama.page_touching import PageToucher, touched

BIG = 64 << 20
"""Above this, one buffer is kept ready instead of two (a recurrent state of a large
hybrid model can be that size, and idle memory should stay small)."""


class WarmBuffers:
    """A supply of touched buffers of the size last asked for, touched by ``pages``."""

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
        self._cond = threading.Condition()
        self._filling = False
        """A fill is given to the page toucher and has not ended."""
        self._closed = False

    def take(self, size: int) -> np.ndarray:
        """A buffer of ``size`` bytes: a touched one when ready, else a new one."""
        with self._cond:
            self._resize(size)
            buf = self._ready.pop() if self._ready else None
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

    def _resize(self, size: int) -> None:
        """Touch buffers of ``size`` from now on, and keep the ready ones that serve it."""
        self._ready = [buf for buf in self._ready if _serves(len(buf), size)]
        self._size = size

    def refill(self) -> None:
        """Let the helper touch what was taken (cheap when nothing was)."""
        if self._size == 0 or len(self._ready) >= self.keep:
            return
        with self._cond:
            if not self._closed and not self._filling:
                self._filling = self._pages.submit(self._fill)

    def _wanted(self) -> int:
        keep = 1 if self._size > BIG else self.keep
        return 0 if self._closed else keep - len(self._ready)

    def _fill(self) -> None:
        """On the page toucher: touch buffers until as many are ready as are wanted."""
        while True:
            with self._cond:
                if self._wanted() <= 0:
                    self._filling = False
                    return
                size = self._size
            t0 = time.perf_counter()
            buf = touched(size)
            with self._cond:
                self.background_seconds += time.perf_counter() - t0
                if _serves(size, self._size) and self._wanted() > 0:
                    self._ready.append(buf)
                    self._cond.notify_all()  # for whoever waits for a ready buffer

    def close(self, wait: bool = True) -> None:
        """Touch no more and let the buffers go; the page toucher too when it was made
        for these buffers (``wait``: for its thread to end)."""
        with self._cond:
            self._closed = True
            self._ready.clear()
            self._cond.notify_all()
        if self._own_pages:
            self._pages.close(wait)


def _serves(buffer: int, size: int) -> bool:
    """Whether a buffer of ``buffer`` bytes may be handed out for ``size``: large enough,
    and less than twice that (the slice handed out keeps the whole buffer alive)."""
    return size <= buffer < 2 * size


SLAB = 32 << 20
"""Bytes of one slab of ``Slabs``: a few window pieces of a large model, many of a small one."""


class Slabs:
    """Touched memory for reads of many sizes a decode cannot put off (window pieces).

    ``WarmBuffers`` keeps buffers of one size; a sliding window's pieces are as long as
    their segments, so each would meet new memory and its page faults. Here they are cut
    one after another out of a slab whose pages were touched ahead (a piece larger than
    half a slab gets memory of its own). Whoever keeps a piece past ``reuse`` copies it out
    first: after it, the slabs are written again.
    """

    def __init__(self, pages: PageToucher) -> None:
        self._pages = pages
        self._slabs: list[np.ndarray] = []
        """Touched slabs, in the order they are cut."""
        self._current = 0
        self._used = 0
        self._cond = threading.Condition()
        self._filling = False
        self._closed = False
        self.misses = 0

    def take(self, size: int) -> np.ndarray:
        """``size`` bytes of touched memory (new memory for a large one, or when none is ready)."""
        if size > SLAB // 2:
            self.misses += 1
            return np.empty(size, dtype=np.uint8)
        with self._cond:
            if self._current < len(self._slabs) and self._used + size > SLAB:
                self._current, self._used = self._current + 1, 0
            if self._current >= len(self._slabs):
                self.misses += 1
                self._slabs.append(np.empty(SLAB, dtype=np.uint8))  # untouched: faults as it is written
            slab = self._slabs[self._current]
            out = slab[self._used : self._used + size]
            self._used += -(-size // 64) * 64
        return out

    def refill(self) -> None:
        """Touch one slab ahead of the one being cut (cheap when one is ready)."""
        with self._cond:
            if self._closed or self._filling or len(self._slabs) > self._current + 1 or not self._slabs:
                return
            self._filling = self._pages.submit(self._fill)

    def _fill(self) -> None:
        slab = touched(SLAB)
        with self._cond:
            if not self._closed:
                self._slabs.append(slab)
            self._filling = False

    def reuse(self) -> None:
        """Every piece cut so far was copied out: cut from the first slab again."""
        with self._cond:
            self._current = self._used = 0

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._slabs.clear()
