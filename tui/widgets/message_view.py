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

Single line breaks are drawn as line breaks, as chat apps do (``chat_markdown``).

A reply's reasoning (``sessions.reasoning``) is drawn apart, above its answer, folded or
dimmed (``ReasoningView``); the Markdown shows the answer. The stored text is untouched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message as WidgetMessage
from textual.widgets import Label, Markdown
from textual.widgets.markdown import MarkdownStream

from sessions.reasoning import ReasoningSplitter, ReplyView, split_reply
from sessions.tree import Message
from tui.safe_text import inert
from tui.widgets.chat_document import ChatMarkdown
from tui.widgets.chat_markdown import chat_parser
from tui.widgets.reasoning_view import ReasoningView

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


def opened_in_reasoning(message: Message | None) -> bool:
    """Whether a stored reply began inside a reasoning block its prompt opened."""
    return message is not None and message.stats is not None and message.stats.opened_in_reasoning


def answer_of(view: ReplyView) -> str:
    """What is not reasoning, as written so far (edges kept, so it only ever grows)."""
    return "".join(part.text for part in view.parts if part.kind == "answer")


def header_text(role: str, position: tuple[int, int], note: str = "") -> Text:
    """``You  ‹ 2/3 ›  note``: the role, which version this is, and a quiet note."""
    text = Text(ROLE_NAMES.get(role, role), style="bold")
    index, count = position
    if count > 1:
        text.append(f"  ‹ {index}/{count} ›", style="italic")
    if note:
        text.append(f"  {note}", style="dim")
    return text


def header_arrow(role: str, position: tuple[int, int], column: int) -> int:
    """Which way a click at ``column`` of the header pages: -1 on ``‹``, 1 on ``›``, else 0.

    The blank beside each arrow counts too: a one-cell target is easy to miss.
    """
    index, count = position
    if count < 2:
        return 0
    left = len(ROLE_NAMES.get(role, role)) + 2
    right = left + len(f"‹ {index}/{count} ›") - 1
    return -1 if column in (left, left + 1) else 1 if column in (right - 1, right) else 0


class MessageView(Vertical):
    """A message (or the reply being written) in the conversation; a click on a stored
    message posts ``Clicked``."""

    @dataclass
    class Clicked(WidgetMessage):
        """The user clicked a stored message: to select it, or on an arrow of its header to page."""

        message_id: int
        page: int = 0
        """-1 or 1: the click was on ``‹`` or ``›``; 0: elsewhere on the message."""

    DEFAULT_CSS = """
    MessageView {
        height: auto;
        padding: 0 1;
        margin: 0 0 1 0;
    }
    MessageView > .message-header { width: 1fr; }
    MessageView > Markdown { margin: 0; padding: 0; }
    /* A code line wider than the panel scrolls sideways; Textual hides that scrollbar, so
       nothing said the line went on. It shows when a line overflows, and only then. */
    MessageView MarkdownFence { overflow-x: auto; scrollbar-size-horizontal: 1; }
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
        self._splitter: ReasoningSplitter | None = None
        self._opens_in_reasoning = False
        """The reply being written began inside reasoning (``begin_stream``)."""
        self._answer = ""
        """The answer of the reply being written handed to the Markdown so far."""
        self.reasoning_shown = False
        """Reasoning drawn whole (dimmed) rather than folded to one line."""
        self.reasoning_key = ""
        """The key that shows or folds reasoning, for the folded line to name."""

    @property
    def message_id(self) -> int | None:
        return None if self.message is None else self.message.id

    @property
    def header_plain(self) -> str:
        """The header as plain text (``You  ‹ 2/2 ›``)."""
        return header_text(self.role, self.position, self.note).plain

    def compose(self) -> ComposeResult:
        yield Label(header_text(self.role, self.position, self.note), classes="message-header")
        reasoning = ReasoningView()
        reasoning.expanded, reasoning.key = self.reasoning_shown, self.reasoning_key
        answer = self.message.text if self.message is not None else ""
        if self.role == "assistant" and self.message is not None:
            view = split_reply(answer, starts_in_reasoning=opened_in_reasoning(self.message))
            reasoning.show_view(view, stored=True)
            answer = view.answer if view.reasoning or view.thinking else answer
        yield reasoning
        text, cut = shown_part(answer)
        self.cut_note = cut
        yield ChatMarkdown(text, open_links=False, parser_factory=chat_parser)
        yield Label(Text(cut), classes="message-cut" + (" -shown" if cut else ""))

    def on_click(self, event: events.Click) -> None:
        if self.message is None:
            return  # the reply being written: nothing to select yet
        event.stop()
        header = self.header
        page = 0
        if event.screen_offset in header.content_region:
            page = header_arrow(self.role, self.position, event.screen_offset.x - header.content_region.x)
        self.post_message(self.Clicked(self.message.id, page))

    @property
    def header(self) -> Label:
        return self.query_one(".message-header", Label)

    @property
    def body(self) -> ChatMarkdown:
        return self.query_one(ChatMarkdown)

    def _set_cut(self, note: str) -> None:
        self.cut_note = note
        label = self.query_one(".message-cut", Label)
        label.update(Text(note))
        label.set_class(bool(note), "-shown")

    @property
    def reasoning(self) -> ReasoningView:
        return self.query_one(ReasoningView)

    def set_reasoning_shown(self, shown: bool) -> None:
        self.reasoning_shown = shown
        self.reasoning.set_expanded(shown)

    async def _show_text(self, text: str) -> None:
        if self.role == "assistant":
            view = split_reply(text, starts_in_reasoning=opened_in_reasoning(self.message))
            self.reasoning.show_view(view, stored=True)
            if view.reasoning or view.thinking:
                text = view.answer
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

    def begin_stream(self, *, opens_in_reasoning: bool = False) -> None:
        """A reply starts here (``opens_in_reasoning``: as ``TextStreamed`` says)."""
        self._stream = Markdown.get_stream(self.body)
        self._streamed = 0
        self._splitter = None
        self._opens_in_reasoning = opens_in_reasoning
        self._answer = ""

    async def write(self, text: str, *, opens_in_reasoning: bool = False) -> None:
        """More of the reply being written: reasoning to its view, the answer to the Markdown.

        The first text says where the reply begins: inside a reasoning block that its prompt
        opened (R1, Qwen3.5), or not; streamed text says so from the first piece on.
        """
        if self._stream is None:
            self.begin_stream(opens_in_reasoning=opens_in_reasoning)
        if self._splitter is None:
            opens = self._opens_in_reasoning or opens_in_reasoning
            self._splitter = ReasoningSplitter(starts_in_reasoning=opens)
        assert self._stream is not None
        view = self._splitter.push(text)
        if view.reasoning or view.thinking:
            self.reasoning.show_view(view)
        answer = answer_of(view)
        if not answer.startswith(self._answer):  # text taken for the answer turned out to be reasoning
            await self._stream.stop()
            await self.body.update("")
            self._stream, self._streamed, self._answer = Markdown.get_stream(self.body), 0, ""
        new, self._answer = answer[len(self._answer):], answer
        room = SHOWN_CHARS - self._streamed
        if room <= 0 or not new:
            return  # drawn once the reply is stored, with the line about the rest
        self._streamed += min(len(new), room)
        await self._stream.write(new[:room])

    async def restart_stream(self, text: str, *, opens_in_reasoning: bool = False) -> None:
        """Show another reply being written here instead (another version written at the
        same time, ``ConversationView.page_versions``): its ``text`` so far, then what follows
        (``opens_in_reasoning`` as for ``write``)."""
        opens = self._opens_in_reasoning or opens_in_reasoning
        await self.end_stream(None)
        await self.body.update("")
        self.reasoning.show_view(split_reply("", starts_in_reasoning=opens))
        self.begin_stream(opens_in_reasoning=opens)
        if text:
            await self.write(text)

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
