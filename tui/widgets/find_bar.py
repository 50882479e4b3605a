"""The find bar below the conversation: the text looked for, and where the find is.

It only reads keys and says what the user asked for (``Changed``, ``Stepped``,
``Closed``); the screen finds (``tui.screens.find_flow``) and writes back the count.
Typing is looked up once it pauses for ``PAUSE`` seconds, so a long chat is not searched
for every letter of a word; Enter looks the text typed so far up at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Input, Label

PAUSE = 0.15
"""Seconds without typing before the text is looked up."""


class FindBar(Horizontal):
    """The text to find and the count; hidden until opened (class ``-open``)."""

    DEFAULT_CSS = """
    FindBar { display: none; height: 1; }
    FindBar.-open { display: block; }
    FindBar > .find-label { width: auto; padding: 0 1; }
    FindBar > Input { width: 1fr; height: 1; border: none; padding: 0; }
    FindBar > #find-count { width: auto; max-width: 60%; padding: 0 1; }
    """

    BINDINGS = [
        Binding("down", "step(1)", "Next match", show=False),
        Binding("up,shift+enter", "step(-1)", "Previous match", show=False),
        Binding("escape", "close", "Close find", show=False),
    ]

    @dataclass
    class Changed(Message):
        """The text to find changed (and typing paused)."""

        query: str

    @dataclass
    class Stepped(Message):
        """Go to the next (1) or previous (-1) match; ``enter``: by Enter, which goes to
        a match on another branch rather than past it."""

        delta: int
        enter: bool = False

    class Closed(Message):
        """The user closed the bar."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._pause: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Label("Find", classes="find-label")
        yield Input(placeholder="text in this chat · Enter next · ↑ previous · Esc closes", id="find-query",
                    compact=True)
        yield Label("", id="find-count")

    @property
    def input(self) -> Input:
        return self.query_one("#find-query", Input)

    @property
    def count(self) -> str:
        return str(self.query_one("#find-count", Label).render())

    @property
    def typing(self) -> bool:
        """Text typed waits for its search (the pause after a key has not run out): an Enter
        now finds what was typed instead of stepping."""
        return self._pause is not None

    def set_count(self, words: str) -> None:
        self.query_one("#find-count", Label).update(Text(words))

    def open(self) -> None:
        self.add_class("-open")
        self.input.focus()
        self.input.select_all()

    @on(Input.Changed, "#find-query")
    def typed(self, event: Input.Changed) -> None:
        event.stop()
        if self._pause is not None:
            self._pause.stop()
        self._pause = self.set_timer(PAUSE, self._flush)

    def _flush(self) -> None:
        self._pause = None
        self.post_message(self.Changed(self.input.value))

    @on(Input.Submitted, "#find-query")
    def submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self._pause is not None:
            self._pause.stop()
            self._flush()
            return  # Enter after typing finds what was typed: the first match is gone to then
        self.post_message(self.Stepped(1, enter=True))

    def action_step(self, delta: int) -> None:
        self.post_message(self.Stepped(delta))

    def action_close(self) -> None:
        if self._pause is not None:
            self._pause.stop()
            self._pause = None
        self.remove_class("-open")
        self.post_message(self.Closed())
