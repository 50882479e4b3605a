"""What the disk tier holds, kept in memory so that ``has`` and eviction need no I/O.

Eviction removes first what costs least to re-decode, in the chats used least recently:

- Files go by sitting (``use_clock``), the sitting used longest ago first. A file's
  sitting is the latest of its own and of every file that builds on it (the cells a range
  extends, the cells a snapshot's point ends), so the start of a chain that is still used
  never goes before its end: a chat's first messages stay in the context for a whole
  sitting and are read again only after a restart.
- Within a sitting, snapshots go first (losing one costs re-decoding from the snapshot
  before it), then the cells of leaves (one range to re-decode), then the cells other
  stored ranges extend (losing those breaks every branch below them); the least recently
  used first within each. Snapshots are thinned evenly: the one nearest the snapshot
  before it on its branch goes first (losing it costs the least re-decoding, and the
  spacing of those left grows evenly, to twice, then four times what it was), and those
  at a message's end (they carry the logits there) only after every snapshot inside a
  message.
- Files on the branches the user is on go last, in the same order among themselves.

Ranks live in a heap that is re-ranked lazily: a use or a new child only ever raises a
rank, which is found out when the entry reaches the top; a rank that drops (a range whose
last child left becomes a leaf) is pushed again. So each eviction costs a few heap
operations, not a pass over every file.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .keys import Key
from .segment import Role
from .use_clock import Use

if TYPE_CHECKING:
    from .file_format import Header
    from .segment import Segment

Rank = tuple[float, int, int, float]
"""(sitting, 0 snapshot | 1 leaf cells | 2 cells others extend, a snapshot's thinning
order, last use): lower goes first."""
MESSAGE_END = 1 << 40
"""Added to the thinning order of a snapshot at a message's end: after every inner one."""


@dataclass
class DiskEntry:
    """One checkpoint file as the index knows it."""

    path: Path
    """Where the file is (its name is derived from the key, but the key alone does not
    say which model folder it is in)."""
    parent: str | None
    """Prefix hash of the parent segment (same compat), or None for a root."""
    size: int
    """File size in bytes, header included."""
    last_use: float
    """Wall-clock time of the last write or read (seeded from the file's mtime)."""
    start: int
    end: int
    has_logits: bool
    has_state: bool = True
    role: Role = ""
    state_len: int = 0
    """Bytes of the state (the logits follow it): what a restore places before it reads."""
    sitting: float = math.nan
    """Start of the latest sitting in which this file or one built on it was used (see
    ``use_clock``); NaN: the file's own last use."""

    def __post_init__(self) -> None:
        if math.isnan(self.sitting):
            self.sitting = self.last_use

    @classmethod
    def of_segment(cls, segment: Segment, path: Path, size: int, use: Use) -> DiskEntry:
        """The entry of a file just written from ``segment``."""
        return cls(path, segment.parent, size, use[1], segment.start, segment.end, segment.logits is not None,
                   len(segment.state) > 0, segment.role, len(segment.state), use[0])

    @classmethod
    def of_header(cls, header: Header, path: Path, size: int, use: Use) -> DiskEntry:
        """The entry of a file found on disk, from its checked header."""
        return cls(path, header.parent, size, use[1], header.start, header.end, header.has_logits,
                   header.state_len > 0, header.role, header.state_len, use[0])


class DiskIndex:
    """Entries by key, their total size, how many stored children each one has, and the
    eviction heap.

    Not thread-safe on its own: the disk tier calls it under its lock.
    """

    def __init__(self) -> None:
        self._entries: dict[Key, DiskEntry] = {}
        self._children: Counter[Key] = Counter()
        self._heap: list[tuple[Rank, int, Key]] = []
        self._queued: dict[Key, Rank] = {}
        """The rank each listed key was last pushed with; its heap item is the valid one."""
        self._spared: set[Key] = set()
        """Keys off the heap because they were on a branch in use when they came up."""
        self._order = itertools.count()
        self.total_bytes = 0
        self.removals = 0
        """Entries removed so far: a read that saw it change cannot tell its file still exists."""

    def add(self, key: Key, entry: DiskEntry) -> None:
        self._insert(key, entry)
        self._spread(key)

    def add_all(self, found: Iterable[tuple[Key, DiskEntry]]) -> None:
        """Add files found on disk in any order, then give each chain its latest sitting."""
        found = list(found)
        for key, entry in found:
            self._insert(key, entry)
        for key, _entry in sorted(found, key=lambda item: item[1].sitting, reverse=True):
            self._spread(key)  # newest first: each ancestor is raised once, then stops the rest

    def _insert(self, key: Key, entry: DiskEntry) -> None:
        self.remove(key)
        self._entries[key] = entry
        self.total_bytes += entry.size
        if entry.parent is not None:
            self._children[(key[0], entry.parent, "cells")] += 1  # the parent's rank rises: found lazily
        self._push(key)

    def remove(self, key: Key) -> DiskEntry | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        self._queued.pop(key, None)
        self._spared.discard(key)
        self.removals += 1
        self.total_bytes -= entry.size
        if entry.parent is not None:
            parent: Key = (key[0], entry.parent, "cells")
            self._children[parent] -= 1
            if self._children[parent] <= 0:
                del self._children[parent]
                if parent in self._entries:
                    self._push(parent)  # a leaf now: its rank dropped
        return entry

    def get(self, key: Key) -> DiskEntry | None:
        return self._entries.get(key)

    def touch(self, key: Key, use: Use) -> None:
        entry = self._entries.get(key)
        if entry is not None:
            entry.last_use = use[1]
            entry.sitting = max(entry.sitting, use[0])
            self._spread(key)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Key]:
        return iter(self._entries)

    def items(self) -> list[tuple[Key, DiskEntry]]:
        return list(self._entries.items())

    def is_leaf(self, key: Key) -> bool:
        """True when no stored segment names ``key`` as its parent."""
        return self._children.get(key, 0) == 0

    def eviction_rank(self, key: Key) -> Rank:
        """Where ``key`` stands among the files of the same class (active or not): lower goes first."""
        entry = self._entries[key]
        if key[2] == "snapshot":
            thin = self._gap_below(key, entry) + (MESSAGE_END if entry.has_logits else 0)
            return (entry.sitting, 0, thin, entry.last_use)
        return (entry.sitting, 1 if self.is_leaf(key) else 2, 0, entry.last_use)

    def _gap_below(self, key: Key, entry: DiskEntry) -> int:
        """Tokens from the snapshot before this one on its branch (found down the chain of
        cells it ends) to this one; from token 0 when there is none, or the chain breaks."""
        below = self._entries.get((key[0], key[1], "cells"))
        while below is not None and below.parent is not None:
            if (key[0], below.parent, "snapshot") in self._entries:
                return entry.end - below.start
            below = self._entries.get((key[0], below.parent, "cells"))
        return entry.end

    def pop_victims(self, budget: int, is_active: Callable[[Key], bool]) -> list[tuple[Key, DiskEntry]]:
        """Remove entries, best victim first, until the total fits ``budget``.

        Files on the branches in use are set aside as they come up (and looked at again
        only when they leave those branches), and taken only once every other file is gone.
        """
        victims: list[tuple[Key, DiskEntry]] = []
        if self.total_bytes <= budget:
            return victims
        for key in [key for key in self._spared if not is_active(key)]:
            self._spared.discard(key)
            self._push(key)
        self._take(budget, victims, is_active)
        if self.total_bytes > budget:  # only files of the branches in use are left
            for key in self._spared:
                self._push(key)
            self._spared.clear()
            self._take(budget, victims, lambda _key: False)
        return victims

    def _take(self, budget: int, victims: list[tuple[Key, DiskEntry]], spare: Callable[[Key], bool]) -> None:
        while self.total_bytes > budget and self._heap:
            rank, _order, key = heapq.heappop(self._heap)
            entry = self._entries.get(key)
            if entry is None or self._queued.get(key) != rank:
                continue  # gone, set aside, or pushed again with another rank
            del self._queued[key]
            if self.eviction_rank(key) != rank:
                self._push(key)  # used (or built on) since it was pushed
            elif spare(key):
                self._spared.add(key)
            else:
                victims.append((key, entry))
                self.remove(key)

    def _push(self, key: Key) -> None:
        rank = self.eviction_rank(key)
        if self._queued.get(key) == rank:
            return  # its heap item already says so
        self._queued[key] = rank
        heapq.heappush(self._heap, (rank, next(self._order), key))
        if len(self._heap) > 2 * len(self._entries) + 64:  # mostly stale items: rebuild
            self._heap = [(r, next(self._order), k) for k, r in self._queued.items()]
            heapq.heapify(self._heap)

    def _spread(self, key: Key) -> None:
        """Raise the sitting of the files ``key`` builds on to its own."""
        sitting = self._entries[key].sitting
        below = self._below(key)
        while below is not None:
            entry = self._entries.get(below)
            if entry is None or entry.sitting >= sitting:
                return  # raised already, by this or a newer use (this also ends a forged cycle)
            entry.sitting = sitting  # its rank rises: found lazily
            below = self._below(below)

    def _below(self, key: Key) -> Key | None:
        """The cells ``key`` builds on: a range's parent, the range a snapshot's point ends."""
        if key[2] == "snapshot":
            return (key[0], key[1], "cells")
        parent = self._entries[key].parent
        return None if parent is None else (key[0], parent, "cells")
