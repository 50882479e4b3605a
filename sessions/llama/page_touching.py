"""One helper thread per context that maps the pages of buffers before they are needed.

A new buffer's pages are mapped on first write, one page fault per 4 KB, and on some
machines (virtual ones especially) the faults cost more than the copy into the buffer.
Two suppliers hand out buffers touched ahead of time: ``warm_buffers`` (the snapshots a
prefill reads while it runs) and ``restore_memory`` (the buffers a restore writes into).
Both give their touching to one ``PageToucher``, which runs it in order on one thread:
one memset helper (``touched``), one thread to start and stop with the context.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections import deque
from collections.abc import Callable

import numpy as np

log = logging.getLogger(__name__)


def touched(size: int) -> np.ndarray:
    """A zeroed buffer with every page mapped (the memset releases the GIL)."""
    buf = np.empty(size, dtype=np.uint8)
    if size:
        ctypes.memset(buf.ctypes.data, 0, size)
    return buf


class PageToucher:
    """A helper thread that runs the touching it is given, in the order given."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._tasks: deque[Callable[[], None]] = deque()
        self._thread: threading.Thread | None = None
        self._closed = False

    @property
    def thread(self) -> threading.Thread | None:
        """The helper thread, once some touching was asked for (None again once closed)."""
        return self._thread

    def submit(self, task: Callable[[], None]) -> bool:
        """Run ``task`` on the helper thread after what was given before; False once closed."""
        with self._cond:
            if self._closed:
                return False
            self._tasks.append(task)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="page-toucher", daemon=True)
                self._thread.start()
            self._cond.notify()
            return True

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._tasks:
                    self._cond.wait()
                if self._closed:
                    return
                task = self._tasks.popleft()
            try:
                task()
            except Exception:  # a supplier's bug must not stop the touching of the other
                log.exception("touching pages failed")

    def close(self, wait: bool = True) -> None:
        """Stop after the task running now (the others are dropped); ``wait``: for the
        thread to end (not from a finaliser: see ``LlamaContext.close``)."""
        with self._cond:
            self._closed = True
            self._tasks.clear()
            self._cond.notify_all()
        thread, self._thread = self._thread, None
        if thread is not None and wait:
            thread.join()
