"""What the disk tier holds, kept in memory so that ``has`` and eviction need no I/O.

Eviction order follows how conversations are used: a leaf no other stored segment builds
on, off the user's current branches, is the tip of an abandoned branch and goes first;
then other inactive segments; the branches the user is on go last. Within a class, the
segment used longest ago goes first.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .keys import Key
from .segment import Role

if TYPE_CHECKING:
    from .file_format import Header
    from .segment import Segment


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

    @classmethod
    def of_segment(cls, segment: Segment, path: Path, size: int, when: float) -> DiskEntry:
        """The entry of a file just written from ``segment``."""
        return cls(path, segment.parent, size, when, segment.start, segment.end, segment.logits is not None,
                   len(segment.state) > 0, segment.role, len(segment.state))

    @classmethod
    def of_header(cls, header: Header, path: Path, size: int, when: float) -> DiskEntry:
        """The entry of a file found on disk, from its checked header."""
        return cls(path, header.parent, size, when, header.start, header.end, header.has_logits,
                   header.state_len > 0, header.role, header.state_len)


class UseClock:
    """Wall-clock time that never repeats, so recency ties cannot happen."""

    def __init__(self) -> None:
        self._last = 0.0

    def now(self) -> float:
        self._last = max(time.time(), self._last + 1e-6)
        return self._last

    def seen(self, when: float) -> None:
        self._last = max(self._last, when)


class DiskIndex:
    """Entries by key, their total size, and how many stored children each one has.

    Not thread-safe on its own: the disk tier calls it under its lock.
    """

    def __init__(self) -> None:
        self._entries: dict[Key, DiskEntry] = {}
        self._children: Counter[Key] = Counter()
        self.total_bytes = 0
        self.removals = 0
        """Entries removed so far: a read that saw it change cannot tell its file still exists."""

    def add(self, key: Key, entry: DiskEntry) -> None:
        self.remove(key)
        self._entries[key] = entry
        self.total_bytes += entry.size
        if entry.parent is not None:
            self._children[(key[0], entry.parent, "cells")] += 1

    def remove(self, key: Key) -> DiskEntry | None:
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        self.removals += 1
        self.total_bytes -= entry.size
        if entry.parent is not None:
            parent: Key = (key[0], entry.parent, "cells")
            self._children[parent] -= 1
            if self._children[parent] <= 0:
                del self._children[parent]
        return entry

    def get(self, key: Key) -> DiskEntry | None:
        return self._entries.get(key)

    def touch(self, key: Key, when: float) -> None:
        entry = self._entries.get(key)
        if entry is not None:
            entry.last_use = when

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

    def eviction_rank(self, key: Key, is_active: Callable[[Key], bool]) -> tuple[int, float]:
        """Lower goes first: (0 inactive leaf | 1 other inactive | 2 active, last use)."""
        entry = self._entries[key]
        if is_active(key):
            tier = 2
        else:
            tier = 0 if self.is_leaf(key) else 1
        return (tier, entry.last_use)

    def pop_victims(
        self, budget: int, is_active: Callable[[Key], bool]
    ) -> list[tuple[Key, DiskEntry]]:
        """Remove entries, best victim first, until the total fits ``budget``.

        Ranks are recomputed after every removal: once the tip of an abandoned branch is
        gone, the segment below it becomes a leaf and is next in line.
        """
        victims: list[tuple[Key, DiskEntry]] = []
        while self.total_bytes > budget and self._entries:
            victim = min(self._entries, key=lambda k: self.eviction_rank(k, is_active))
            victims.append((victim, self._entries[victim]))
            self.remove(victim)
        return victims
