"""The background writer: every disk write of the store happens on this one thread.

Generation must never wait on a disk. ``submit`` only appends to a bounded queue; when
the queue is full the oldest pending write is dropped (the segment is still in RAM, and
at worst its tokens are recomputed later) rather than making the caller wait.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable

from .errors import StoreClosedError
from .keys import Key
from .segment import Segment

log = logging.getLogger(__name__)


class BackgroundWriter:
    """A bounded queue of segments drained by one daemon thread into ``sink``."""

    def __init__(
        self,
        sink: Callable[[Segment], None],
        *,
        remove: Callable[[Key], None],
        startup: Callable[[], None],
        report: Callable[[str], None],
        max_items: int,
        max_bytes: int,
    ) -> None:
        self._sink = sink
        self._remove = remove
        self._startup = startup
        self._report = report
        self.max_items = max(1, int(max_items))
        self.max_bytes = max(0, int(max_bytes))
        self._queue: OrderedDict[Key, Segment | None] = OrderedDict()
        """Pending writes, and deletions (``None``) queued behind them in the same order."""
        self._queued_bytes = 0
        self._in_flight: Segment | None = None
        self._busy = False
        """An item (a write or a deletion) is being worked on."""
        self._ready = False
        self._closing = False
        self._cond = threading.Condition()
        self.dropped = 0
        """Queued writes dropped because the queue was full."""
        self._thread = threading.Thread(target=self._run, name="checkpoint-writer", daemon=True)
        self._thread.start()

    def submit(self, segment: Segment) -> None:
        """Queue ``segment`` for writing; returns at once, dropping the oldest if full."""
        key = segment.key
        with self._cond:
            if self._closing:
                raise StoreClosedError()
            if self._queue.get(key) is not None or (self._in_flight is not None and self._in_flight.key == key):
                return
            self._queue.pop(key, None)  # a deletion queued before: this write supersedes it
            while self._queue and (
                len(self._queue) >= self.max_items
                or self._queued_bytes + segment.nbytes > self.max_bytes
            ):
                _old_key, old = self._queue.popitem(last=False)
                if old is not None:
                    self._queued_bytes -= old.nbytes
                    self.dropped += 1
            self._queue[key] = segment
            self._queued_bytes += segment.nbytes
            self._cond.notify_all()

    def discard(self, key: Key) -> None:
        """Take ``key`` off the disk: drop its queued write, or delete its file after any write in flight."""
        with self._cond:
            if self._closing:
                return
            old = self._queue.pop(key, None)
            if old is not None:
                self._queued_bytes -= old.nbytes
            self._queue[key] = None
            self._cond.notify_all()

    def pending(self, key: Key) -> Segment | None:
        """A segment queued or being written, so a read never misses it in between."""
        with self._cond:
            if self._in_flight is not None and self._in_flight.key == key:
                return self._in_flight
            return self._queue.get(key)  # None for a queued deletion too

    def deleting(self, key: Key) -> bool:
        """Whether a deletion of ``key`` is queued."""
        with self._cond:
            return key in self._queue and self._queue[key] is None

    @property
    def pending_count(self) -> int:
        with self._cond:
            return sum(item is not None for item in self._queue.values()) + (self._in_flight is not None)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued write is done; False if ``timeout`` ran out first."""
        with self._cond:
            return self._cond.wait_for(self._idle, timeout)

    def close(self, timeout: float | None = None) -> bool:
        """Finish the queued writes and stop the thread; False if it did not stop in time."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _idle(self) -> bool:
        if not self._thread.is_alive():
            return True
        return self._ready and not self._queue and not self._busy

    def _run(self) -> None:
        try:
            self._startup()
        except Exception as error:  # the writer must outlive any single failure
            log.exception("checkpoint store start-up failed")
            self._report(f"the checkpoint store could not start its disk tier ({error})")
        with self._cond:
            self._ready = True
            self._cond.notify_all()
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closing)
                if not self._queue:
                    return
                key, segment = self._queue.popitem(last=False)
                if segment is not None:
                    self._queued_bytes -= segment.nbytes
                self._in_flight = segment
                self._busy = True
            try:
                if segment is None:
                    self._remove(key)
                else:
                    self._sink(segment)
            except Exception as error:
                log.exception("checkpoint write failed")
                self._report(f"a checkpoint could not be written ({error}); it stays in memory only")
            finally:
                with self._cond:
                    self._in_flight = None
                    self._busy = False
                    self._cond.notify_all()
