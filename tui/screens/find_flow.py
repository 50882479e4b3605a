"""Find in the open chat (``FindBar``): the matches on the branch shown, in order, then
those on other branches, each offered as a switch.

The core finds (``SessionController.find``: a scan of the chat's texts, quick enough for
the UI thread even in a chat of thousands of messages). The list is read again at every
step, so a step after a reply or a switch walks the chat as it is now; the place in it is
kept by message. Going to a match on another branch is the tree's "go to message": the
branch holding it becomes the one shown, once the engine is idle.
"""

from __future__ import annotations

from sessions.api.chat import FindHit
from sessions.errors import LlamachatError
from tui.screens import job_flow
from tui.screens.chat_host import ChatHost
from tui.widgets.find_bar import FindBar
from tui.widgets.find_marks import FindMarks


def count_words(hits: list[FindHit], at: int | None) -> str:
    """``3 of 12 (2 on other branches)``, or what the match on another branch offers."""
    shown = [hit for hit in hits if hit.on_branch]
    others = len(hits) - len(shown)
    elsewhere = f" ({others} on other branches)" if others > 1 else " (1 on another branch)" if others else ""
    if not hits:
        return "no match"
    if at is None:
        return f"{len(shown)} here{elsewhere}"
    if hits[at].on_branch:
        return f"{at + 1} of {len(shown)}{elsewhere}"
    return f"in another branch ({at - len(shown) + 1} of {others}): Enter goes there, ↓ the next"


class Finder:
    """The find of one chat screen: the text, the matches, and the one it is at."""

    def __init__(self, screen: ChatHost, bar: FindBar) -> None:
        self.screen = screen
        self.bar = bar
        self.query = ""
        self.hits: list[FindHit] = []
        self.at: int | None = None
        """Index in ``hits`` of the match the find is at (None: none yet)."""

    @property
    def is_open(self) -> bool:
        return self.bar.has_class("-open")

    @property
    def current(self) -> FindHit | None:
        return self.hits[self.at] if self.at is not None else None

    def open(self) -> None:
        self.bar.open()
        if self.query:
            self.refresh()

    def close(self) -> None:
        """The marks go; the message the find was at stays selected."""
        self.screen.conversation_view.set_marks(None)
        self.screen.chat_input.focus()

    def _read(self) -> bool:
        """Find ``query`` again, staying at the message the find was at; False when the
        chat cannot be read (the bar says why)."""
        kept = self.current.message_id if self.current is not None else None
        if self.screen.controller.session_id is None:
            self.hits, self.at = [], None
            self.bar.set_count("no chat is open")
            return False
        try:
            self.hits = self.screen.controller.find(self.query)
        except LlamachatError as error:
            self.hits, self.at = [], None
            self.bar.set_count(str(error))
            self.screen.conversation_view.set_marks(None)
            return False
        self.at = next((i for i, hit in enumerate(self.hits) if hit.message_id == kept), None)
        return True

    def _show(self, *, select: bool) -> None:
        hit = self.current
        here = frozenset(h.message_id for h in self.hits if h.on_branch)
        current = hit.message_id if hit is not None and hit.on_branch else None
        self.screen.conversation_view.set_marks(FindMarks(self.query, here, current) if self.query else None)
        if select and current is not None:
            self.screen.conversation_view.select(current)
        self.bar.set_count(count_words(self.hits, self.at) if self.query.strip() else "")

    def search(self, query: str) -> None:
        """New text: go to its first match on the branch shown (or offer the first elsewhere)."""
        self.query, self.at = query, None
        if self._read():
            self.at = 0 if self.hits else None
            self._show(select=True)

    def refresh(self) -> None:
        """The chat changed under the find (a reply, a switch): mark it as it is now."""
        if self.query and self._read():
            self._show(select=False)

    async def step(self, delta: int, *, enter: bool = False) -> None:
        """Next or previous match, round the branch shown and then the others; Enter on a
        match of another branch goes there."""
        hit = self.current
        if enter and hit is not None and not hit.on_branch:
            await self._go_to(hit.message_id)
            return
        if not self._read() or not self.hits:
            self._show(select=False)
            return
        self.at = 0 if self.at is None and delta > 0 else ((self.at or 0) + delta) % len(self.hits)
        self._show(select=True)

    async def _go_to(self, message_id: int) -> None:
        screen = self.screen

        async def switch() -> None:
            screen.controller.select(message_id)
            await screen.show_head(selected=message_id)  # its redraw marks the new branch (``refresh``)
            await job_flow.after_switch(screen)

        if screen.controller.session_id is not None:
            await screen.gestures.when_idle(switch)
