"""Stop strings: a reply's text as it streams, cut before the first stop string it holds.

A stop string may arrive split over several pieces of text, so the end of what came so
far is held back while it could be the start of one, and sent once it cannot. The reply
is cut before the stop string, which is not sent (as OpenAI and llama-server do).
"""

from __future__ import annotations

from collections.abc import Sequence


class StopWatch:
    """One reply's text, with its stop strings found as the text comes."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = [stop for stop in stops if stop]
        self.stopped = False
        """A stop string was found: nothing more of this reply is sent."""
        self._held = ""

    def push(self, text: str) -> str:
        """Take the next piece of the reply; returns what can be sent now."""
        if self.stopped:
            return ""
        held = self._held + text
        found = [at for at in (held.find(stop) for stop in self.stops) if at >= 0]
        if found:
            self.stopped = True
            self._held = ""
            return held[:min(found)]
        keep = max((size for stop in self.stops for size in range(min(len(stop) - 1, len(held)), 0, -1)
                    if held.endswith(stop[:size])), default=0)
        self._held = held[len(held) - keep:]
        return held[:len(held) - keep]

    def finish(self) -> str:
        """The reply ended: what was held back (nothing after a stop string)."""
        held, self._held = self._held, ""
        return "" if self.stopped else held
