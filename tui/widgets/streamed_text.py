"""Text of the reply being written, held and drawn a few times a second.

Redrawing for every token would keep the UI thread busy, and the engine thread needs the
GIL between tokens: the pieces are joined and handed to ``draw`` at most every
``STREAM_INTERVAL``. ``forget`` drops what was not drawn yet (the stored reply replaces it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from textual.timer import Timer
from textual.widget import Widget

STREAM_INTERVAL = 1 / 12
"""Seconds between two updates of a reply being written."""


class StreamedText:
    """The pieces of a reply not drawn yet, and the timer that draws them."""

    def __init__(self, owner: Widget, draw: Callable[[str, bool], Awaitable[None]]) -> None:
        self._owner = owner
        self._draw = draw
        """Draws the text joined; with it, whether the reply began inside reasoning."""
        self._pieces: list[str] = []
        self._opens_in_reasoning = False
        """The reply began inside reasoning (``TextStreamed.opens_in_reasoning``)."""
        self._timer: Timer | None = None

    def add(self, text: str, *, opens_in_reasoning: bool = False) -> None:
        """More text; drawn at most ``STREAM_INTERVAL`` later."""
        self._opens_in_reasoning = opens_in_reasoning
        self._pieces.append(text)
        if self._timer is None:
            self._timer = self._owner.set_timer(STREAM_INTERVAL, self._flush)

    async def _flush(self) -> None:
        self._timer = None
        text, self._pieces = "".join(self._pieces), []
        if text:
            await self._draw(text, self._opens_in_reasoning)

    def forget(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._pieces = []
