"""The message box: a multi-line ``TextArea`` where Enter sends.

A ``TextArea`` inserts a newline on Enter in its own key handler, which runs before
ordinary bindings; the send key is therefore a *priority* binding of this widget (only
active while it has focus), so it stays rebindable from ``[keys]`` like every other key.
Shift+Enter and Ctrl+J (for terminals that cannot send Shift+Enter) insert a newline.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message
from textual.widgets import TextArea

from tui.bindings import bindings_for

PLACEHOLDER = "Write a message. Enter sends, Ctrl+J adds a line, F1 lists every key."


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

        chat_input: "ChatInput"
        text: str

        @property
        def control(self) -> "ChatInput":
            return self.chat_input

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            id=id,
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            placeholder=PLACEHOLDER,
            highlight_cursor_line=False,
        )

    def action_submit(self) -> None:
        self.post_message(self.Submitted(self, self.text))

    def action_newline(self) -> None:
        self.insert("\n")

    def set_draft(self, text: str) -> None:
        """Replace the contents (e.g. with a message to edit) and put the cursor at the end."""
        self.load_text(text)
        self.move_cursor(self.document.end)
        self.focus()
