"""One message of the active branch: a header line and the text rendered as Markdown.

Model text is untrusted. It reaches this widget already made inert (``tui.safe_text``),
the header is a ``rich.text.Text`` (never parsed as markup), and links in the Markdown
are not opened on click, so a reply cannot run terminal escapes, style the interface
or send the user to a web page by itself.

A reply being written is a ``MessageView`` without a message id; it streams through
``Markdown.get_stream`` (many small appends merged), and when the reply is stored the
same widget adopts the stored message, so nothing is rendered twice.

A message can be huge (a megabyte pasted into the input, a runaway reply). Wrapping that
much text on every layout would freeze the app, so only the first ``SHOWN_CHARS`` are
drawn, with a line saying how much more there is; the message itself is kept whole.
"""

from __future__ import annotations

import re

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Label, Markdown
from textual.widgets.markdown import MarkdownStream

from sessions.tree import Message
from tui.safe_text import inert

ROLE_NAMES = {"user": "You", "assistant": "Assistant", "system": "System"}
SHOWN_CHARS = 50_000
"""Characters of one message drawn on screen; the rest is kept, copied and exported."""

_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,})[^\n]*\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.M | re.S)


def code_blocks(markdown: str) -> list[str]:
    """The contents of the fenced code blocks of ``markdown``, in order."""
    return [match.group("body") for match in _FENCE.finditer(markdown)]


def shown_part(text: str) -> tuple[str, str]:
    """The part of ``text`` to draw (made inert) and the line about the rest ("" if none)."""
    if len(text) <= SHOWN_CHARS:
        return inert(text), ""
    rest = len(text) - SHOWN_CHARS
    return inert(text[:SHOWN_CHARS]), (f"… {rest:,} more characters not shown here; the whole "
                                        "message is kept (F9 copies it, F4 exports it)")


def header_text(role: str, position: tuple[int, int], note: str = "") -> Text:
    """``You  ‹ 2/3 ›  note``: the role, which version this is, and a quiet note."""
    text = Text(ROLE_NAMES.get(role, role), style="bold")
    index, count = position
    if count > 1:
        text.append(f"  ‹ {index}/{count} ›", style="italic")
    if note:
        text.append(f"  {note}", style="dim")
    return text


class MessageView(Vertical):
    """A message (or the reply being written) in the conversation."""

    DEFAULT_CSS = """
    MessageView {
        height: auto;
        padding: 0 1;
        margin: 0 0 1 0;
    }
    MessageView > .message-header { width: 1fr; }
    MessageView > Markdown { margin: 0; padding: 0; }
    MessageView > .message-cut { display: none; color: $text-muted; text-style: italic; }
    MessageView > .message-cut.-shown { display: block; }
    """

    def __init__(self, message: Message | None, *, role: str = "assistant",
                 position: tuple[int, int] = (1, 1), note: str = "") -> None:
        role = message.role if message is not None else role
        super().__init__(classes=f"message -{role}")
        self.message = message
        self.role = role
        self.position = position
        self.note = note
        self._stream: MarkdownStream | None = None
        self._streamed = 0
        """Characters of the reply being written handed to the Markdown stream so far."""
        self.cut_note = ""
        """The line about text not drawn ("" when the whole message is shown)."""

    @property
    def message_id(self) -> int | None:
        return None if self.message is None else self.message.id

    @property
    def header_plain(self) -> str:
        """The header as plain text (``You  ‹ 2/2 ›``)."""
        return header_text(self.role, self.position, self.note).plain

    def compose(self) -> ComposeResult:
        yield Label(header_text(self.role, self.position, self.note), classes="message-header")
        text, cut = shown_part(self.message.text) if self.message is not None else ("", "")
        self.cut_note = cut
        yield Markdown(text, open_links=False)
        yield Label(Text(cut), classes="message-cut" + (" -shown" if cut else ""))

    @property
    def body(self) -> Markdown:
        return self.query_one(Markdown)

    def _set_cut(self, note: str) -> None:
        self.cut_note = note
        label = self.query_one(".message-cut", Label)
        label.update(Text(note))
        label.set_class(bool(note), "-shown")

    async def _show_text(self, text: str) -> None:
        shown, cut = shown_part(text)
        await self.body.update(shown)
        self._set_cut(cut)

    def set_position(self, position: tuple[int, int], note: str = "") -> None:
        if position != self.position or note != self.note:
            self.position, self.note = position, note
            self.query_one(".message-header", Label).update(header_text(self.role, position, note))

    async def set_message(self, message: Message, position: tuple[int, int], note: str = "") -> None:
        """Show ``message`` here (re-rendering only when the text changed)."""
        changed = self.message is None or self.message.text != message.text
        self.message = message
        self.set_position(position, note)
        if changed:
            await self._show_text(message.text)

    # -- streaming ----------------------------------------------------------------------

    def begin_stream(self) -> None:
        self._stream = Markdown.get_stream(self.body)
        self._streamed = 0

    async def write(self, text: str) -> None:
        if self._stream is None:
            self.begin_stream()
        assert self._stream is not None
        room = SHOWN_CHARS - self._streamed
        if room <= 0:
            return  # drawn once the reply is stored, with the line about the rest
        self._streamed += min(len(text), room)
        await self._stream.write(text[:room])

    async def end_stream(self, final: Message | None) -> None:
        """Stop streaming; with ``final`` the stored reply replaces the streamed text.

        The final ``update`` matters: a fence opened near the end of a chunk can leave
        the incrementally built document short of the full text.
        """
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.stop()
        if final is not None:
            self.message = final
            await self._show_text(final.text)
