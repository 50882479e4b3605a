"""The RAM tier: the segments most likely to be restored next, LRU by bytes.

Restoring from RAM costs a memcpy; from disk, a read and a checksum. The tier keeps the
most recently used segments under a byte budget, and evicts segments on the branches the
user is on only when nothing else is left to evict. A segment whose disk write the
writer's full queue dropped exists here alone until the queue has drained and it is
written: it goes last of all, and before it the segments still queued for the disk, so
that a burst of states (a hybrid's prefill) larger than this tier still reaches the disk
whole while it fits here and in the queue together.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Literal

from .keys import Key
from .segment import Segment

Standing = Literal["disk", "queued", "alone"]


class RamTier:
    """A byte-bounded LRU of segments; thread-safe, never does I/O."""

    def __init__(self, budget: int, is_protected: Callable[[Key], bool],
                 standing: Callable[[Key], Standing] = lambda key: "disk",
                 writes_dropped: Callable[[], bool] = lambda: False) -> None:
        self.budget = max(0, int(budget))
        self._is_protected = is_protected
        self._standing = standing
        """Where else a segment is: on disk (or nowhere by choice), queued for it, or alone
        here (its queued write was dropped for room and is not queued again yet)."""
        self._writes_dropped = writes_dropped
        """Whether any write waits to be queued again (only then does ``standing`` matter)."""
        self._items: OrderedDict[Key, Segment] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.evictions = 0
        """Segments dropped to stay under the budget."""

    def put(self, segment: Segment) -> bool:
        """Keep ``segment`` as the most recent one; False when it alone exceeds the budget."""
        key = segment.key
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            if segment.nbytes > self.budget:
                return False
            self._items[key] = segment
            self._bytes += segment.nbytes
            self._evict_locked()
            return True

    def get(self, key: Key) -> Segment | None:
        """The segment under ``key``, marked as just used; None when absent."""
        with self._lock:
            segment = self._items.get(key)
            if segment is not None:
                self._items.move_to_end(key)
            return segment

    def peek(self, key: Key) -> Segment | None:
        """The segment under ``key`` without marking it used."""
        with self._lock:
            return self._items.get(key)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._items

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def protected_bytes(self, besides: frozenset[Key] = frozenset()) -> int:
        """Bytes of the protected segments held, but for those under ``besides``."""
        with self._lock:
            return sum(segment.nbytes for key, segment in self._items.items()
                       if key not in besides and self._is_protected(key))

    def keys(self) -> list[Key]:
        """Keys from least to most recently used."""
        with self._lock:
            return list(self._items)

    def _evict_locked(self) -> None:
        while self._bytes > self.budget:
            victim = self._victim()
            self._bytes -= self._items.pop(victim).nbytes
            self.evictions += 1

    def _victim(self) -> Key:
        """The oldest segment off the user's branches, else the oldest.

        While writes wait to be queued again (a burst the writer's queue could not hold):
        the oldest off those branches that the disk has; else one queued for the disk, the
        newest first (the queue drops its oldest when full, and what it drops must still be
        here); else the oldest the disk has; else the oldest, alone here.
        """
        keys = self._items
        if not self._writes_dropped():
            return next((k for k in keys if not self._is_protected(k)), None) or next(iter(keys))
        return (next((k for k in keys if not self._is_protected(k) and self._standing(k) == "disk"), None)
                or next((k for k in reversed(keys) if self._standing(k) == "queued"), None)
                or next((k for k in keys if self._standing(k) == "disk"), None)
                or next(iter(keys)))
