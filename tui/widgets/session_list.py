"""The list of saved sessions, newest first, for switching between conversations.

Each entry is two lines: the title, then how long ago it changed and how many messages
it holds, which is usually enough to recognise a chat without opening it. The session
that is open is marked, so the list also answers "where am I". The widget only shows
what it is given (``SessionSummary`` values); reading the store is the caller's job,
so the list never blocks the UI on the database.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime

from textual import on
from textual.app import ComposeResult
from textual.content import Content
from textual.message import Message
from textual.widget import Widget
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from sessions.api.library import SessionSummary
from tui.safe_text import inert

CURRENT_MARK = "▸"
UNTITLED = "Untitled session"


def relative_time(then: float, now: float | None = None) -> str:
    """``then`` (Unix seconds) as people say it: "5 min ago", "yesterday", a date."""
    now = time.time() if now is None else now
    seconds = now - then
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    if seconds < 2 * 86400:
        return "yesterday"
    if seconds < 7 * 86400:
        return f"{int(seconds // 86400)} days ago"
    return datetime.fromtimestamp(then).strftime("%Y-%m-%d")


def display_title(summary: SessionSummary) -> str:
    """The title as drawn: one line, safe for the terminal, never blank."""
    return inert(" ".join(summary.title.split())) or UNTITLED


def session_prompt(summary: SessionSummary, current: bool, now: float | None = None, *,
                   detail: str | None = None, marks: tuple[int, ...] = ()) -> Content:
    """The two lines shown for one session.

    ``detail`` replaces the second line (the pickers show where a search matched);
    ``marks`` are indexes into ``display_title`` to highlight (fuzzy-matched letters).
    """
    title = Content(display_title(summary))
    if current:
        title = title.stylize("bold")
    for index in marks:
        title = title.stylize("$accent bold underline", index, index + 1)
    count = "1 message" if summary.message_count == 1 else f"{summary.message_count} messages"
    # The id tells apart chats of the same title, and is what `--session N` takes.
    second = detail if detail is not None else f"#{summary.id} · {relative_time(summary.updated_at, now)} · {count}"
    return Content.assemble(
        (f"{CURRENT_MARK} " if current else "  ", "$accent bold"),
        title,
        "\n  ",
        (second, "$stats-foreground"),
    )


def option_id(session_id: int) -> str:
    return f"session-{session_id}"


def session_id_of(option: Option) -> int | None:
    """The session an option stands for (None for options that are not sessions)."""
    if option.id is None or not option.id.startswith("session-"):
        return None
    return int(option.id.removeprefix("session-"))


class SessionList(Widget):
    """Saved sessions, newest first; enter or a click posts ``SessionChosen``."""

    DEFAULT_CSS = """
    SessionList { height: 1fr; }
    SessionList > OptionList { height: 1fr; max-height: 100%; }
    /* A wrapped title would go on at the left edge, under the current mark, where the
       next chat's row seems to begin: each line ends in "…" instead. */
    SessionList > OptionList { text-wrap: nowrap; text-overflow: ellipsis; }
    """

    @dataclass
    class SessionChosen(Message):
        """The user picked a session to open."""

        session_id: int
        session_list: SessionList | None = field(default=None, repr=False)

        @property
        def control(self) -> SessionList | None:
            return self.session_list

    def __init__(self, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.current_id: int | None = None
        self.session_ids: list[int] = []
        """The sessions shown, in display order."""
        self._pending: tuple[list[SessionSummary], int | None, float | None] | None = None
        self._ready = False
        """True once the option list exists (``show`` before that is replayed on mount)."""

    def compose(self) -> ComposeResult:
        yield OptionList(id="session-options", compact=True)

    def on_mount(self) -> None:
        self._ready = True
        if self._pending is not None:
            summaries, current_id, now = self._pending
            self.show(summaries, current_id, now=now)

    @property
    def options(self) -> OptionList:
        return self.query_one(OptionList)

    @property
    def highlighted_id(self) -> int | None:
        """The session under the cursor (None when the list is empty)."""
        option = self.options.highlighted_option if self._ready else None
        return session_id_of(option) if option is not None else None

    def focus(self, scroll_visible: bool = True) -> SessionList:
        """Focus the list inside (the widget itself takes no keys)."""
        self.options.focus(scroll_visible)
        return self

    def show(self, summaries: list[SessionSummary], current_id: int | None,
             *, now: float | None = None) -> None:
        """Show ``summaries`` newest first; the highlight stays on the same session."""
        if not self._ready:
            self._pending = (list(summaries), current_id, now)
            return
        self._pending = None
        ordered = sorted(summaries, key=lambda s: (s.updated_at, s.id), reverse=True)
        options = self.options
        highlighted = options.highlighted_option
        keep = session_id_of(highlighted) if highlighted is not None else None
        self.current_id = current_id
        self.session_ids = [summary.id for summary in ordered]
        options.set_options(
            Option(session_prompt(summary, summary.id == current_id, now), id=option_id(summary.id))
            for summary in ordered
        )
        for wanted in (keep, current_id):
            if wanted is not None and wanted in self.session_ids:
                options.highlighted = self.session_ids.index(wanted)
                break
        else:
            options.highlighted = 0 if ordered else None

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        session_id = session_id_of(event.option)
        if session_id is not None:
            self.post_message(self.SessionChosen(session_id, self))
