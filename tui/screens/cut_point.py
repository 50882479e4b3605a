"""Choosing the place inside a reply to go on from ("continue from here").

The reply's text is shown read-only with the cursor at its end; the user moves it (keys
or a click) to where the new version should leave the reply and go on, and Enter
chooses. The text is the stored model text made inert character for character (a control
character becomes its visible picture, a carriage return a line break), so a place in
what is shown is the same place in the reply.
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static, TextArea

from tui.safe_text import inert

QUESTION = "Move the cursor to where the new version goes on from, then press Enter (Esc: cancel)."


def shown(text: str) -> str:
    """``text`` as the dialog draws it: one character for one character."""
    return inert(text.replace("\r", "\n"))


class CutPoint(ModalScreen[int | None]):
    """Returns how many characters of the reply to keep; None when cancelled."""

    CSS_PATH = "modals.tcss"
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="cut.cancel"),
                Binding("enter", "choose", "Go on from here", id="cut.choose", priority=True)]
    DEFAULT_CSS = """
    CutPoint #dialog { height: 100%; max-height: 28; }  /* whole on a short terminal: the text gives way */
    CutPoint #cut-text { height: 1fr; }
    """

    def __init__(self, text: str, *, which: str = "") -> None:
        """``which``: says which reply it is, when the user did not select it."""
        super().__init__()
        self._text = shown(text)
        self._which = which

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            yield Label(self._which + QUESTION, id="dialog-question", markup=False)
            yield TextArea(self._text, id="cut-text", read_only=True, soft_wrap=True, show_line_numbers=False)
            yield Static("", id="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Go on from here", variant="primary", id="dialog-yes")
                yield Button("Cancel", id="dialog-no")

    def on_mount(self) -> None:
        area = self.query_one(TextArea)
        area.move_cursor(area.document.end)
        area.focus()

    @property
    def chosen(self) -> int:
        """Characters before the cursor."""
        row, column = self.query_one(TextArea).cursor_location
        lines = self._text.split("\n")
        return sum(len(line) + 1 for line in lines[:row]) + column

    @on(Button.Pressed, "#dialog-yes")
    def action_choose(self) -> None:
        at = self.chosen
        if at <= 0 or at >= len(self._text):
            self.query_one("#dialog-error", Static).update(
                "Put the cursor inside the reply: at its end, continue it instead (Ctrl+G).")
            return
        self.dismiss(at)

    @on(Button.Pressed, "#dialog-no")
    def action_cancel(self) -> None:
        self.dismiss(None)
