"""Open any saved session by typing a few letters of its title, or words it contains.

Titles are matched fuzzily (``tui.fuzzy``) in memory, instantly, on every key. Titles
are often vague ("Question about code"), so from three characters on the picker also
asks the store's full-text search for messages containing the words and lists those
sessions after the title matches, with the matching snippet. Both reads of the
database run in thread workers, so a large history never freezes the typing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from sessions.api.library import SearchHit, SessionSummary, StoreError
from tui.fuzzy import fuzzy_rank
from tui.safe_text import inert
from tui.widgets.session_list import display_title, option_id, session_prompt

SEARCH_FROM = 3
"""Queries at least this long also search the message text."""
SNIPPET_LIMIT = 70


class SessionSource(Protocol):
    """Where the picker reads sessions from (the controller's ``library``, a ``SessionLibrary``);
    called from worker threads."""

    def list_sessions(self) -> list[SessionSummary]: ...

    def search_sessions(self, query: str) -> list[SearchHit]: ...


def snippet_line(hit: SearchHit) -> str:
    """The second line of a text-search result: where the words were found."""
    if hit.message_id is None:
        return "title matches"
    text = inert(" ".join(hit.snippet.split()))
    if len(text) > SNIPPET_LIMIT:
        text = text[: SNIPPET_LIMIT - 1] + "…"
    return f"in a message: {text}"


@dataclass(frozen=True)
class Picked:
    """The session chosen, and the message a text search found in it (None for a title)."""

    session_id: int
    message_id: int | None = None


def hit_option_id(hit: SearchHit) -> str:
    """An option for a search hit names the message too (``session-3-message-17``)."""
    base = option_id(hit.session_id)
    return base if hit.message_id is None else f"{base}-message-{hit.message_id}"


def picked(option: Option) -> Picked | None:
    """What choosing ``option`` picks (None for an option that is not a session)."""
    if option.id is None or not option.id.startswith("session-"):
        return None
    session, _, message = option.id.removeprefix("session-").partition("-message-")
    return Picked(int(session), int(message) if message else None)


class SessionPicker(ModalScreen[Picked | None]):
    """Pick a session; dismisses with it (and the message a search found), or None on escape."""

    CSS_PATH = "modals.tcss"
    BINDINGS = [
        Binding("escape", "cancel", "Close", id="picker.cancel"),
        Binding("down", "move(1)", "Next", show=False, id="picker.next"),
        Binding("up", "move(-1)", "Previous", show=False, id="picker.previous"),
    ]

    @dataclass
    class SessionsLoaded(Message):
        summaries: list[SessionSummary]
        error: str | None = None

    @dataclass
    class HitsFound(Message):
        query: str
        hits: list[SearchHit]
        error: str | None = None

    def __init__(self, sessions: SessionSource, *, current_id: int | None = None) -> None:
        super().__init__()
        self._sessions = sessions
        self._current_id = current_id
        self._summaries: list[SessionSummary] = []
        self._hits: list[SearchHit] = []
        self._hits_query = ""
        self.loaded = False
        """True once the session list has been read (tests wait for it)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static("Open a session", id="picker-title")
            yield Input(placeholder="Type part of a title, or words from the chat",
                        id="picker-query")
            yield OptionList(id="picker-options")
            yield Static(Text("Reading sessions…"), id="picker-status")

    def on_mount(self) -> None:
        self.query_one(Input).focus()
        self._load_sessions()

    @property
    def query_text(self) -> str:
        return self.query_one(Input).value.strip()

    @property
    def shown_ids(self) -> list[int]:
        """The session ids listed, in order (for tests and key handling)."""
        options = self.query_one(OptionList).options
        return [choice.session_id for choice in map(picked, options) if choice is not None]

    @work(thread=True, exclusive=True, group="picker-sessions", exit_on_error=False,
          description="reading the session list")
    def _load_sessions(self) -> None:
        try:
            self.post_message(self.SessionsLoaded(self._sessions.list_sessions()))
        except StoreError as error:
            self.post_message(self.SessionsLoaded([], str(error)))

    @work(thread=True, exclusive=True, group="picker-search", exit_on_error=False,
          description="searching the messages")
    def _search(self, query: str) -> None:
        try:
            self.post_message(self.HitsFound(query, self._sessions.search_sessions(query)))
        except StoreError as error:
            self.post_message(self.HitsFound(query, [], str(error)))

    @on(SessionsLoaded)
    def _sessions_loaded(self, event: SessionsLoaded) -> None:
        self._summaries = event.summaries
        self.loaded = True
        self._refresh(error=event.error)

    @on(HitsFound)
    def _hits_found(self, event: HitsFound) -> None:
        if event.query != self.query_text:
            return  # an older query's answer arrived late
        self._hits, self._hits_query = event.hits, event.query
        self._refresh(error=event.error)

    @on(Input.Changed, "#picker-query")
    def _query_changed(self) -> None:
        query = self.query_text
        if len(query) >= SEARCH_FROM:
            self._search(query)
        else:
            self._hits, self._hits_query = [], ""
        self._refresh()

    def _refresh(self, error: str | None = None) -> None:
        query = self.query_text
        by_id = {summary.id: summary for summary in self._summaries}
        ranked = fuzzy_rank(query, self._summaries, display_title)
        options = [
            Option(session_prompt(summary, summary.id == self._current_id, marks=match.positions),
                   id=option_id(summary.id))
            for summary, match in ranked
        ]
        listed = {summary.id for summary, _ in ranked}
        hits = self._hits if self._hits_query == query else []
        for hit in hits:
            if hit.session_id in listed:
                continue
            listed.add(hit.session_id)
            summary = by_id.get(hit.session_id) or SessionSummary(hit.session_id, hit.title, 0, 0)
            options.append(Option(
                session_prompt(summary, hit.session_id == self._current_id,
                               detail=snippet_line(hit)),
                id=hit_option_id(hit)))
        widget = self.query_one(OptionList)
        widget.set_options(options)
        widget.highlighted = 0 if options else None
        # Text, never markup: the status quotes the typed query and the store's own words.
        status = inert(error) if error else self._status(query, len(options))
        self.query_one("#picker-status", Static).update(Text(status))

    def _status(self, query: str, count: int) -> str:
        if not self.loaded:
            return "Reading sessions…"
        if not self._summaries:
            return "No saved sessions yet"
        if not count:
            return f"Nothing matches {inert(query)!r}"
        searching = " (searching the messages…)" if len(query) >= SEARCH_FROM and self._hits_query != query else ""
        return f"{count} of {len(self._summaries)} sessions{searching} · enter opens, escape closes"

    def action_move(self, delta: int) -> None:
        widget = self.query_one(OptionList)
        if delta > 0:
            widget.action_cursor_down()
        else:
            widget.action_cursor_up()

    @on(Input.Submitted, "#picker-query")
    def _submitted(self) -> None:
        self.query_one(OptionList).action_select()

    @on(OptionList.OptionSelected, "#picker-options")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(picked(event.option))

    def action_cancel(self) -> None:
        self.dismiss(None)
