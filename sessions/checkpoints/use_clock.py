"""When each checkpoint file was last used, and the sitting that use belongs to.

Eviction goes by sittings rather than by single uses: restoring a branch, extending it and
writing its new files touches a chat's files within seconds, and those files should leave
the disk together, the cheapest to re-decode first, once the chat has been left alone
longest. A sitting is a run of uses with no pause longer than ``SITTING_GAP``, cut after
``SITTING_SPAN`` so that a day spent in the app still tells its morning from its evening.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Protocol

SITTING_GAP = 600.0
"""Seconds without a use that end a sitting: a reply read and answered comes well within
it, a chat put aside for a coffee does not."""
SITTING_SPAN = 3600.0
"""Longest sitting, in seconds."""

Use = tuple[float, float]
"""(start of the sitting, time of the use), both wall-clock seconds."""


class Stamped(Protocol):
    last_use: float
    sitting: float


class UseClock:
    """Wall-clock time that never repeats (so recency ties cannot happen), in sittings."""

    def __init__(self) -> None:
        self._last = 0.0
        self._sitting = 0.0

    def now(self) -> Use:
        return self._stamp(max(time.time(), self._last + 1e-6))

    def seed(self, found: Iterable[Stamped]) -> None:
        """Give files found on disk their sittings from their times (their last uses, kept
        as modification times), oldest first; uses from now on continue after the newest."""
        for entry in sorted(found, key=lambda e: e.last_use):
            entry.sitting = self._stamp(max(entry.last_use, self._last))[0]

    def _stamp(self, when: float) -> Use:
        if when - self._last > SITTING_GAP or when - self._sitting > SITTING_SPAN:
            self._sitting = when
        self._last = when
        return (self._sitting, when)
