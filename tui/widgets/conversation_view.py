"""The active branch, root first, as a scrolling column of ``MessageView``s.

``show`` is called after every gesture; it keeps the views whose message is unchanged
(the common prefix of the old and the new branch) and only mounts or removes the rest,
so paging between versions of the last reply does not re-render the whole chat. The
reply being written is one extra view at the end that adopts its stored message.

Streamed text is buffered here (``append_text``) and drawn a few times a second:
redrawing for every token would keep the UI thread busy, and the engine thread needs
the GIL between tokens. ``finish_stream`` drops what was not drawn yet, since the stored
reply replaces it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime

from rich.text import Text
from textual.containers import VerticalScroll
from textual.timer import Timer

from sessions.controller import ChatSnapshot, Message, StopReason
from sessions.controller.continuation import CAN_CONTINUE
from tui.safe_text import inert
from tui.widgets.message_view import MessageView, opened_in_reasoning

STOP_NOTES = {StopReason.CANCELLED: "stopped", StopReason.LENGTH: "cut at the length limit",
              StopReason.CONTEXT_FULL: "context full"}
STREAM_INTERVAL = 1 / 12
"""Seconds between two updates of a reply being written."""


def message_time(created_at: float, now: float | None = None) -> str:
    """When a message was written, as short as is clear: ``14:02``, ``Mar 3 14:02``, ``2024-03-03``."""
    then = datetime.fromtimestamp(created_at)
    today = datetime.fromtimestamp(now if now is not None else time.time())
    if then.date() == today.date():
        return then.strftime("%H:%M")
    if then.year == today.year:
        return f"{then.strftime('%b')} {then.day} {then.strftime('%H:%M')}"
    return then.strftime("%Y-%m-%d")


def message_note(message: Message, continue_key: str = "", now: float | None = None) -> str:
    """The quiet note after a message's header: when, and for a reply its length and why it
    ended early (with ``continue_key`` for a reply that can be continued)."""
    parts = [message_time(message.created_at, now)]
    if message.stats is not None and message.role == "assistant":
        parts.append(f"{message.stats.tokens_generated} tokens")
        reason = StopReason.parse(message.stats.stop_reason)
        if reason in STOP_NOTES:
            hint = f" ({continue_key} continues)" if continue_key and reason in CAN_CONTINUE else ""
            parts.append(STOP_NOTES[reason] + hint)
    return " · ".join(parts)


class ConversationView(VerticalScroll):
    """Messages of the active branch; one of them may be selected."""

    DEFAULT_CSS = """
    ConversationView { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.selected_id: int | None = None
        self._streamed: list[str] = []
        """Text of the reply being written not drawn yet."""
        self._opens_in_reasoning = False
        """That reply began inside reasoning (``TextStreamed.opens_in_reasoning``)."""
        self._flush_timer: Timer | None = None
        self.reasoning_shown = False
        """Reasoning is drawn whole (dimmed) in every reply, rather than folded."""
        self.keys: dict[str, str] = {}
        """How the footer writes the keys the messages mention (``continue-reply``, ``toggle-reasoning``)."""

    @property
    def views(self) -> list[MessageView]:
        return list(self.query_children(MessageView))

    def view_for(self, message_id: int) -> MessageView | None:
        return next((view for view in self.views if view.message_id == message_id), None)

    @property
    def reply_view(self) -> MessageView | None:
        """The view of the reply being written, if any."""
        views = self.views
        return views[-1] if views and views[-1].message_id is None else None

    async def show_chat(self, snapshot: ChatSnapshot | None) -> None:
        """Show the active branch of ``snapshot`` and its title (or that no chat is open)."""
        if snapshot is None:
            await self.show([], {})
        else:
            await self.show(snapshot.path, snapshot.positions())
        self.show_title(snapshot)

    def show_title(self, snapshot: ChatSnapshot | None) -> None:
        self.border_title = Text("no chat open" if snapshot is None else inert(snapshot.title) or "New chat")

    async def show(self, path: Sequence[Message], positions: Mapping[int, tuple[int, int]]) -> None:
        """Display ``path``; ``positions`` maps message ids to ``(i, n)`` among siblings."""
        views = self.views
        keep = 0
        while keep < len(views) and keep < len(path) and views[keep].message_id == path[keep].id:
            keep += 1
        for view, message in zip(views[:keep], path[:keep], strict=True):
            await view.set_message(message, positions.get(message.id, (1, 1)), self.note(message))
        if views[keep:]:
            await self.remove_children(views[keep:])
        new = [self._view(m, positions.get(m.id, (1, 1))) for m in path[keep:]]
        if new:
            await self.mount_all(new)
        selected = self.view_for(self.selected_id) if self.selected_id is not None else None
        if selected is not None and selected in new and keep:
            # The gesture replaced the selected message under a kept part of the branch (paged
            # its versions, chose it in the tree): its header stays in view once laid out, not
            # the end of the branch below. A chat opened whole is shown as ``select`` shows it.
            self.anchor(False)
            self.call_after_refresh(self.scroll_to_widget, selected.header, animate=False)
        elif new:
            self.anchor()  # new messages lay out after this: stay at the end as they do
        self.select(self.selected_id if selected is not None else None)

    def note(self, message: Message) -> str:
        return message_note(message, self.keys.get("continue-reply", ""))

    def _view(self, message: Message | None, position: tuple[int, int] = (1, 1), note: str = "") -> MessageView:
        view = MessageView(message, position=position, note=self.note(message) if message else note)
        view.reasoning_shown, view.reasoning_key = self.reasoning_shown, self.keys.get("toggle-reasoning", "")
        return view

    def set_reasoning_shown(self, shown: bool) -> None:
        """Draw every reply's reasoning whole and dimmed, or folded to one line."""
        self.reasoning_shown = shown
        for view in self.views:
            view.set_reasoning_shown(shown)

    def select(self, message_id: int | None) -> None:
        """Highlight one message (None: no selection) and bring it into view."""
        self.selected_id = message_id
        for view in self.views:
            view.set_class(message_id is not None and view.message_id == message_id, "-selected")
        target = self.view_for(message_id) if message_id is not None else None
        if target is not None:
            self.scroll_to_widget(target, animate=False, immediate=True)

    async def begin_reply(self, continued: Message | None = None) -> MessageView:
        """Mount the view the next reply streams into and follow it down.

        With ``continued`` the reply goes on from that message: its view (and any after it)
        gives way to one that starts with its text.
        """
        if continued is not None:
            views = self.views
            at = next((i for i, view in enumerate(views) if view.message_id == continued.id), len(views))
            if views[at:]:
                await self.remove_children(views[at:])  # the reply, and what followed it on this branch
        view = self._view(None, note="continuing…" if continued else "writing…")
        await self.mount(view)
        view.begin_stream(opens_in_reasoning=opened_in_reasoning(continued))
        if continued is not None:
            await view.write(inert(continued.text))  # stored model text: drawn inert like the rest
        self.anchor()
        return view

    def append_text(self, text: str, *, opens_in_reasoning: bool = False) -> None:
        """More text of the reply being written; drawn at most ``STREAM_INTERVAL`` later.

        ``opens_in_reasoning``: the reply began inside reasoning (``TextStreamed``).
        """
        self._opens_in_reasoning = opens_in_reasoning
        self._streamed.append(text)
        if self._flush_timer is None:
            self._flush_timer = self.set_timer(STREAM_INTERVAL, self._flush)

    async def _flush(self) -> None:
        self._flush_timer = None
        text, self._streamed = "".join(self._streamed), []
        view = self.reply_view
        if view is not None and text:
            await view.write(text, opens_in_reasoning=self._opens_in_reasoning)

    def _forget_streamed(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        self._streamed = []

    async def finish_stream(self, final: Message) -> None:
        """The reply is stored: its view shows the stored text (undrawn pieces are dropped)."""
        self._forget_streamed()
        view = self.reply_view
        if view is not None:
            await view.end_stream(final)

    async def drop_reply(self) -> None:
        """Remove the reply view when no reply was stored (an error or an early stop)."""
        self._forget_streamed()
        view = self.reply_view
        if view is not None:
            await view.end_stream(None)
            await view.remove()
