"""The message box: a multi-line ``TextArea`` where Enter sends.

A ``TextArea`` inserts a newline on Enter in its own key handler, which runs before
ordinary bindings; the send key is therefore a *priority* binding of this widget (only
active while it has focus), so it stays rebindable from ``[keys]`` like every other key.
Shift+Enter and Ctrl+J (for terminals that cannot send Shift+Enter) insert a newline.

Those two keys are priority bindings, so the app runs them as soon as it reads them,
while the keys typed just before are still waiting in this widget's queue (a terminal
delivers "hello⏎" in one read, and a busy start-up makes the queue lag). Both actions
therefore go through the same queue (``call_later``), after the text they follow.

A ``TextArea`` re-wraps its whole text after every edit. With a megabyte pasted in, that
makes each keystroke slow, so lines stop wrapping while the text is longer than
``WRAP_LIMIT`` characters (they scroll sideways instead) and wrap again once it is short.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.message import Message
from textual.widgets import TextArea
from textual.widgets.text_area import EditResult

from tui.bindings import bindings_for
from tui.safe_text import for_input

PLACEHOLDER = "Write a message. Enter sends, Ctrl+J adds a line, F1 lists every key."
WRAP_LIMIT = 100_000
"""Longest text (in characters) that is soft-wrapped while it is edited."""


class ChatInput(TextArea):
    """Where the user writes (or edits) a message."""

    BINDINGS = bindings_for("input")

    DEFAULT_CSS = """
    ChatInput {
        height: auto;
        min-height: 3;
        max-height: 12;
    }
    """

    @dataclass
    class Submitted(Message):
        """The user asked to send what is written."""

        chat_input: ChatInput
        text: str

        @property
        def control(self) -> ChatInput:
            return self.chat_input

    @dataclass
    class NothingToUndo(Message):
        """Ctrl+Z with no typing left to undo: the screen's undo (a deletion) may take it."""

    async def _on_key(self, event: events.Key) -> None:
        """A terminal sends Alt+letter as ESC and the letter, read as ``alt+<letter>`` with
        the letter as its character: that is a key for the app (Alt+S finds...), not typing."""
        if event.key.startswith("alt+") and event.character is not None and len(event.key) == len("alt+") + 1:
            event.prevent_default()  # TextArea's own handler would insert the letter
            return

    def clear(self) -> EditResult:
        """Empty the input for the next message: the typing of the one sent (or dropped) is
        no longer undoable, so that Ctrl+Z reaches a deletion made after it."""
        result = super().clear()
        self.history.clear()
        return result

    def action_undo(self) -> None:
        """Undo typing first; with none left, Ctrl+Z goes on to what the screen can undo."""
        if self.history.undo_stack:
            super().action_undo()
        else:
            self.post_message(self.NothingToUndo())

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            id=id,
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            placeholder=PLACEHOLDER,
            highlight_cursor_line=False,
        )

    def _fit_wrapping(self, length: int) -> None:
        wrap = length <= WRAP_LIMIT
        if self.soft_wrap != wrap:
            self.soft_wrap = wrap

    async def _on_paste(self, event: events.Paste) -> None:
        # Runs before ``TextArea._on_paste`` (Textual calls the handler of every class in
        # the MRO, this one first), so a huge paste is never wrapped at all.
        self._fit_wrapping(len(self.text) + len(event.text))

    def _on_text_area_changed(self, event: TextArea.Changed) -> None:
        self._fit_wrapping(len(self.text))

    def action_submit(self) -> None:
        self.call_later(lambda: self.post_message(self.Submitted(self, self.text)))

    def action_newline(self) -> None:
        self.call_later(self.insert, "\n")

    def set_draft(self, text: str) -> None:
        """Replace the contents (e.g. with a message to edit) and put the cursor at the end."""
        self.load_text(for_input(text))
        self.move_cursor(self.document.end)
        self.focus()
