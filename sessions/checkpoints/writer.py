"""The background writer: every disk write of the store happens on this one thread.

Generation must never wait on a disk. ``submit`` only appends to a bounded queue; when
the queue is full the oldest pending write is dropped rather than making the caller wait.
The segment is still in RAM: once the queue has drained, the writer asks for the dropped
ones again (``retry``) and writes those the RAM tier still holds, so a prefill whose states
come faster than the disk takes them (a hybrid's, of 50 to 150 MB each) still leaves them
on disk, later; only those the RAM tier evicted first are recomputed when needed. A segment
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
        retry: Callable[[list[Key]], None] = lambda keys: None,
    ) -> None:
        self._sink = sink
        self._retry = retry
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
        self._dropped_keys: dict[Key, None] = {}
        """Writes dropped since the queue last drained, oldest first: asked for again then."""
        self._asking: frozenset[Key] = frozenset()
        """The dropped writes being asked for again (``retry``) right now."""
        self._thread = threading.Thread(target=self._run, name="checkpoint-writer", daemon=True)
        self._thread.start()

    def submit(self, segment: Segment, *, again: bool = False) -> None:
        """Queue ``segment`` for writing; returns at once, dropping the oldest writes if full.

        ``again``: a write dropped earlier, asked for again; a deletion of its key queued
        since then wins over it (a new write supersedes a queued deletion).
        """
        key = segment.key
        with self._cond:
            if self._closing:
                raise StoreClosedError()
            if self._queue.get(key) is not None or (self._in_flight is not None and self._in_flight.key == key):
                return
            if again and (key in self._queue or self._deleting == key):
                return
            self._queue.pop(key, None)  # a deletion queued before: this write supersedes it
            self._dropped_keys.pop(key, None)
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
            self._dropped_keys[key] = None
            count -= 1

    def discard(self, key: Key) -> None:
        """Take ``key`` off the disk: drop its queued write, or delete its file after any write in flight."""
        with self._cond:
            if self._closing:
                return
            old = self._queue.pop(key, None)
            if old is not None:
                self._queued_bytes -= old.nbytes
            self._dropped_keys.pop(key, None)  # deleted: never written again
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
        return self._ready and not self._queue and not self._busy and not self._dropped_keys

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
            again: list[Key] | None = None
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closing or self._dropped_keys)
                if not self._queue and self._closing:
                    return  # what was dropped stays in RAM: a quit does not wait to write it
                if not self._queue:
                    again, self._dropped_keys = list(self._dropped_keys), {}
                    self._asking = frozenset(again)
                else:
                    key, segment = self._queue.popitem(last=False)
                    if segment is not None:
                        self._queued_bytes -= segment.nbytes
                    self._in_flight = segment
                    self._deleting = key if segment is None else None
                self._busy = True
            if again is not None:
                self._ask_again(again)
                continue
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

    def _ask_again(self, keys: list[Key]) -> None:
        """The queue has drained: the writes dropped meanwhile are asked for again (``retry``
        queues those still in RAM), outside the lock, as any caller's ``submit``."""
        try:
            self._retry(keys)
        except StoreClosedError:
            pass
        except Exception as error:  # the writer must outlive any single failure
            log.exception("checkpoint retry failed")
            self._report(f"checkpoints dropped for room could not be queued again ({error})")
        finally:
            with self._cond:
                self._asking = frozenset()
                self._busy = False
                self._cond.notify_all()

    def queued(self, key: Key) -> bool:
        """Whether the write of ``key`` waits in the queue (which may still drop it)."""
        with self._cond:
            return self._queue.get(key) is not None

    def any_dropped(self) -> bool:
        """Whether some write was dropped for room and is not queued again yet."""
        with self._cond:
            return bool(self._dropped_keys or self._asking)

    def is_dropped(self, key: Key) -> bool:
        """Whether the write of ``key`` was dropped for room and not queued again yet: its
        RAM copy is then the only one (the RAM tier keeps such copies longest)."""
        with self._cond:
            return key in self._dropped_keys or key in self._asking
