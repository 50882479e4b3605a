"""Which messages of a long branch have widgets: the arithmetic of the conversation's window.

A chat can hold thousands of messages. Each one drawn is a handful of widgets (its header,
the blocks of its Markdown) that take time to build and lay out and memory to hold, so a
view that mounted every message would open, and quit, the more slowly the longer the
chat. ``ConversationView`` mounts only the messages near the part shown and stands in for
the others with two spacers as tall as those messages are: measured once they have been
drawn, estimated from their text before. The scroll bar and the scroll
position then behave as over the whole branch, and the window follows the scroll.

``Heights`` holds the rows of every message of the branch and where each one starts;
``window_for`` says which messages to mount for a given part of it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate

from tui.widgets.message_view import SHOWN_CHARS

MOST_MOUNTED = 80
"""Messages mounted at most, whatever their size: what bounds the widgets of a long chat."""
WHOLE_UP_TO = 40
"""A branch of at most this many messages is mounted whole: it costs little, and nothing moves."""
GAP = 1
"""Rows between two messages (``MessageView``'s bottom margin)."""


def estimated_rows(text: str, width: int) -> int:
    """Rows a message is likely to take at ``width`` columns: its header, each line of its
    text wrapped, the margin under its last block and the gap after it. Markdown draws a
    little more or less (headings, code blocks, tables); the spacers only need to be about
    right, and measured rows replace the estimate once the message has been drawn."""
    width = max(width, 8)
    return 1 + sum(max(1, -(-len(line) // width)) for line in text[:SHOWN_CHARS].split("\n")) + 1 + GAP


class Heights:
    """The rows each message of the branch takes (measured or estimated) and their tops."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.measured: list[bool] = []
        self.tops: list[int] = [0]
        """``tops[i]``: the row where message ``i`` starts; ``tops[-1]``: the total."""

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def total(self) -> int:
        return self.tops[-1]

    def replace_from(self, keep: int, texts: Sequence[str], width: int) -> None:
        """Keep the first ``keep`` messages' rows and estimate those of ``texts`` after them."""
        del self.rows[keep:], self.measured[keep:]
        self.rows += [estimated_rows(text, width) for text in texts]
        self.measured += [False] * len(texts)
        self._sum()

    def estimate_again(self, texts: Sequence[str], width: int) -> None:
        """The width changed: every message is estimated again (and measured again once shown)."""
        self.rows = [estimated_rows(text, width) for text in texts]
        self.measured = [False] * len(texts)
        self._sum()

    def measure(self, rows: dict[int, int]) -> bool:
        """Messages drawn (index: rows taken); whether any differed from what was held."""
        changed = False
        for index, count in rows.items():
            if 0 <= index < len(self.rows) and count > 0:
                changed |= self.rows[index] != count
                self.rows[index], self.measured[index] = count, True
        if changed:
            self._sum()
        return changed

    def index_at(self, row: float) -> int:
        """The message drawn at ``row`` (the first or last one past the ends)."""
        if not self.rows:
            return 0
        return min(max(bisect_right(self.tops, row) - 1, 0), len(self.rows) - 1)

    def _sum(self) -> None:
        self.tops = [0, *accumulate(self.rows)]


def window_for(heights: Heights, top: float, screen: int, most: int = MOST_MOUNTED) -> tuple[int, int]:
    """The messages ``[lo, hi)`` to mount to show rows ``top`` to ``top + screen``: those
    rows and a screen more on each side, at most ``most`` messages (those shown first); the
    whole of a short branch."""
    if len(heights) <= WHOLE_UP_TO:
        return 0, len(heights)
    first, last = heights.index_at(top), heights.index_at(top + max(screen, 1) - 1)
    lo, hi = heights.index_at(top - screen), heights.index_at(top + 2 * screen) + 1
    if hi - lo > most:
        room = max(most - (last + 1 - first), 0)
        lo = max(lo, first - room // 2)
        hi = min(hi, max(last + 1, lo + most))
    return lo, hi


def window_at_end(heights: Heights, screen: int, most: int = MOST_MOUNTED) -> tuple[int, int]:
    """The messages to mount to show the end of the branch."""
    return window_for(heights, max(heights.total - screen, 0), screen, most)


def needs_moving(heights: Heights, window: tuple[int, int], top: float, screen: int) -> bool:
    """Whether rows ``top`` to ``top + screen`` come within half a screen of an end of the
    mounted ``window`` that has more messages beyond it."""
    lo, hi = window
    if lo >= hi:
        return bool(len(heights))
    margin = screen / 2
    return (lo > 0 and top - margin < heights.tops[lo]) or \
        (hi < len(heights) and top + screen + margin > heights.tops[hi])
