"""The text of several versions of a reply written at once, and which one is shown.

Every version streams all the time (``TextStreamed.version``); only the one shown is
drawn, and paging to another draws what it has so far, then its text as it comes.
"""

from __future__ import annotations


class VersionStreams:
    def __init__(self, count: int) -> None:
        self.count = count
        self.shown = 0
        self._texts = [""] * count
        self.opens_in_reasoning = False
        """The versions begin inside reasoning (``TextStreamed.opens_in_reasoning``)."""

    def add(self, version: int, text: str, *, opens_in_reasoning: bool = False) -> bool:
        """Keep more text of ``version``; True when it is the one shown (to be drawn)."""
        self.opens_in_reasoning = self.opens_in_reasoning or opens_in_reasoning
        if 0 <= version < self.count:
            self._texts[version] += text
        return version == self.shown

    def page(self, delta: int) -> bool:
        """Show the version ``delta`` away, clamped at the ends; True when that changed it."""
        shown = max(0, min(self.count - 1, self.shown + delta))
        changed, self.shown = shown != self.shown, shown
        return changed

    def text(self) -> str:
        """What the version shown has written so far."""
        return self._texts[self.shown]
