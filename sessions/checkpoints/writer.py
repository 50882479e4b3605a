"""The background writer: every disk write of the store happens on this one thread.

Generation must never wait on a disk. ``submit`` only appends to a bounded queue; when
the queue is full the oldest pending write is dropped (the segment is still in RAM, and
at worst its tokens are recomputed later) rather than making the caller wait. A segment
larger than the whole queue still goes in, after the writes before it: a sliding window
of a large model can weigh more than the queue's bound (a 27B Gemma 3's 1,024-token
window is about 400 MB), and refusing it would keep every such snapshot off the disk, so
that a reopen recomputes the chat; the queue then holds that one segment alone. Deletions
are never dropped (a file left behind would stay on disk unlisted until a restart) and do
not count against either bound: each is a key and no payload, one at most per checkpoint.
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
        self._deleting: Key | None = None
        """The key whose deletion is being worked on."""
        self._busy = False
        """An item (a write or a deletion) is being worked on."""
        self._ready = False
        self._closing = False
        self._cond = threading.Condition()
        self.dropped = 0
        """Queued writes dropped for room in the queue."""
        self._thread = threading.Thread(target=self._run, name="checkpoint-writer", daemon=True)
        self._thread.start()

    def submit(self, segment: Segment) -> None:
        """Queue ``segment`` for writing; returns at once, dropping the oldest writes if full."""
        key = segment.key
        with self._cond:
            if self._closing:
                raise StoreClosedError()
            if self._queue.get(key) is not None or (self._in_flight is not None and self._in_flight.key == key):
                return
            self._queue.pop(key, None)  # a deletion queued before: this write supersedes it
            self._make_room(segment.nbytes)
            self._queue[key] = segment
            self._queued_bytes += segment.nbytes
            self._cond.notify_all()

    def _make_room(self, nbytes: int) -> None:
        """Drop the oldest queued writes (never a deletion) until one of ``nbytes`` fits, or
        none is left (a segment larger than the whole bound)."""
        writes = [key for key, item in self._queue.items() if item is not None]  # oldest first
        count = len(writes)
        for key in writes:
            if count < self.max_items and self._queued_bytes + nbytes <= self.max_bytes:
                return
            old = self._queue.pop(key)
            assert old is not None
            self._queued_bytes -= old.nbytes
            self.dropped += 1
            count -= 1

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
        """Whether a deletion of ``key`` is queued or under way (the disk index may still list it)."""
        with self._cond:
            return self._deleting == key or (key in self._queue and self._queue[key] is None)

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
                self._deleting = key if segment is None else None
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
                    self._in_flight = self._deleting = None
                    self._busy = False
                    self._cond.notify_all()
