"""The buffers a restore writes into, kept from one restore to the next with their pages mapped.

A restore puts checkpoint bytes where llama.cpp reads them from: cells joined into one
state per batch, a sliding window laid out as a ring. Into new memory, that costs a page
fault per 4 KB, and on some machines (virtual ones especially) the faults cost more than
the reads and copies, several times a copy into memory already touched
(``docs/benchmarks.md``, "What the engine's choices rest on"). These buffers are
therefore kept (grow-only, up to ``KEEP`` bytes each) and, when an engine starts,
touched ahead of the first restore (``prepare``), sized from the checkpoints on disk:
the model loads and the chat opens meanwhile. The touching runs on the page
toucher (``page_touching``) made here, which the context's warm buffers share. The
helper thread that reads checkpoints beside a restore is kept here too (``reader``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from sessions.llama.page_touching import PageToucher, touched

log = logging.getLogger(__name__)

KEEP = 256 << 20
"""Largest buffer kept between restores; a larger one is made for one restore and freed.

Kept buffers are memory held for good (join buffers, and a ring or a recurrent
snapshot). The limit lets the ring of a model of a few billion parameters stay (a
gemma3 of about 2B with a 1,024-token window has a ring of 100-200 MB by its shape):
mapping that much anew costs several times the copy into it, and more than a GPU's
prefill of a few thousand tokens. Beyond it (a model whose ring or largest cells file
alone passes 256 MB), a restore pays the page faults rather than hold that much beside
the cache for good."""

READERS = 1
"""Helper threads reading beside a restore (``reader``). One, so that the reads happen in
the order they were asked for (the snapshot first). One is enough now that checking a
file costs little (``file_format.crc32``): reading a batch then takes about as long as
llama.cpp's copy of it, and a second helper only competed for the cores and the GIL (the
figures, and the other orders tried: ``docs/benchmarks.md``, "What the engine's choices
rest on")."""


class RestoreMemory:
    """Named reusable buffers: ``get`` one of at least a size, ``prepare`` them early."""

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}
        self._busy: set[str] = set()
        """Names a helper thread is touching now."""
        self._cond = threading.Condition()
        self.pages = PageToucher()
        """The one thread that touches pages ahead of need: for ``prepare``, and for the
        warm buffers of the context that holds this memory (``LlamaContext``)."""
        self._reader: ThreadPoolExecutor | None = None

    def reader(self) -> ThreadPoolExecutor:
        """The helper that reads checkpoints beside a restore (``sessions.branching.restore_reads``).

        Kept from one restore to the next like the buffers, and first asked for by
        ``prepare``, so that its thread starts while the model loads: starting a thread
        at each restore and joining it at the end costs a few percent of a restore."""
        with self._cond:
            if self._reader is None:
                self._reader = ThreadPoolExecutor(READERS, thread_name_prefix="checkpoint-read")
                self._reader.submit(int)  # a pool starts its thread at the first task
            return self._reader

    def get(self, name: str, size: int) -> np.ndarray:
        """A buffer of ``size`` bytes under ``name``: the kept one when large enough.

        Its bytes are whatever the last user left (zeros at first). Waits while a
        ``prepare`` touches that buffer: it maps the very pages the caller would.
        """
        with self._cond:
            while name in self._busy:
                self._cond.wait()
            buf = self._buffers.get(name)
            if buf is not None and len(buf) >= size:
                return buf[:size]
        buf = touched(size)
        if size <= KEEP:
            with self._cond:
                self._buffers[name] = buf
        return buf

    def drop(self, name: str) -> None:
        """Forget the buffer under ``name``: the next ``get`` gives zeroed memory.

        For a buffer whose bytes must not outlive a failed read: a damaged file's bytes
        scattered into the ring's masked cells.
        """
        with self._cond:
            while name in self._busy:
                self._cond.wait()
            self._buffers.pop(name, None)

    def prepare(self, sizes: Callable[[], dict[str, int]]) -> None:
        """Touch the buffers ``sizes()`` names, in its order, on the page toucher.

        ``sizes`` runs on that thread too (it may read files): the caller goes on at once.
        """

        def run() -> None:
            try:
                wanted = sizes()
            except Exception as error:  # a store closed meanwhile: nothing to prepare for
                log.debug("restore memory not prepared: %s", error)
                return
            for name, size in wanted.items():
                with self._cond:
                    if not 0 < size <= KEEP or len(self._buffers.get(name, ())) >= size or name in self._busy:
                        continue
                    self._busy.add(name)
                buf = None
                try:
                    buf = touched(size)
                finally:
                    with self._cond:
                        self._busy.discard(name)
                        if buf is not None and len(self._buffers.get(name, ())) < size:
                            self._buffers[name] = buf
                        self._cond.notify_all()

        self.pages.submit(run)
        self.reader()  # its thread starts now, not in the first restore

    def close(self, wait: bool = True) -> None:
        """Let the buffers go and stop the reader; ``wait``: for the helper threads to end
        (not from a finaliser: see ``LlamaContext.close``)."""
        self.pages.close(wait)
        with self._cond:
            reader, self._reader = self._reader, None
        if reader is not None:
            reader.shutdown(wait=wait)
        with self._cond:
            self._buffers.clear()
