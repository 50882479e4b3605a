"""Memory for the state reads a decode cannot put off, with its pages already mapped.

A new buffer's pages are mapped on first write, one page fault per 4 KB. On some
machines (virtual ones especially) that costs more than the copy itself: on the
development VM, reading a 4 MB sliding window took 2.9 ms into new memory and 0.7 ms
into touched memory. The snapshots a prefill must read while it runs (a window the ring
is about to overwrite, a recurrent state the next token changes) have one size per
model, so a helper thread keeps a buffer or two of that size with every page touched,
and the decode loop takes one instead of allocating.

The helper starts touching when the next ``llama_decode`` starts (``refill``), not when a
buffer is taken: then the decode loop's own work between two batches has the cores to
itself. It touches pages in ``ctypes.memset``, which releases the GIL: on a machine
with free cores (any GPU machine) it costs nothing; on a busy CPU it takes a few
milliseconds from a decode that lasts a second (measured: 3 ms per 4 MB window here,
beside a 0.5 s batch; at the lowest priority it only waited longer, for no gain).
"""

from __future__ import annotations

import ctypes
import threading
import time

import numpy as np

BIG = 64 << 20
"""Above this, one buffer is kept ready instead of two (a recurrent state of a large
hybrid model can be that size, and idle memory should stay small)."""


class WarmBuffers:
    """A helper thread's supply of touched buffers of the size last asked for."""

    def __init__(self, keep: int = 2) -> None:
        self.keep = keep
        self.background_seconds = 0.0
        """Time the helper thread spent touching pages (off the decode's path)."""
        self.hits = 0
        self.misses = 0
        self._ready: list[np.ndarray] = []
        self._size = 0
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
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
            if not self._closed:
                self._start()
                self._cond.notify()

    def _wanted(self) -> int:
        keep = 1 if self._size > BIG else self.keep
        return 0 if self._closed else keep - len(self._ready)

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="warm-buffers", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and self._wanted() <= 0:
                    self._cond.wait()
                if self._closed:
                    return
                size = self._size
            t0 = time.perf_counter()
            buf = np.empty(size, dtype=np.uint8)
            ctypes.memset(buf.ctypes.data, 0, size)
            with self._cond:
                self.background_seconds += time.perf_counter() - t0
                if _serves(size, self._size) and self._wanted() > 0:
                    self._ready.append(buf)
                    self._cond.notify_all()  # for whoever waits for a ready buffer

    def close(self, wait: bool = True) -> None:
        """Stop the helper thread and let the buffers go; ``wait``: for the thread to end."""
        with self._cond:
            self._closed = True
            self._ready.clear()
            self._cond.notify_all()
        thread, self._thread = self._thread, None
        if thread is not None and wait:
            thread.join()


def _serves(buffer: int, size: int) -> bool:
    """Whether a buffer of ``buffer`` bytes may be handed out for ``size``: large enough,
    and less than twice that (the slice handed out keeps the whole buffer alive)."""
    return size <= buffer < 2 * size
