"""The active branch, root first, as a scrolling column of ``MessageView``s.

``show`` is called after every gesture; it keeps the views whose message is unchanged
(the common prefix of the old and the new branch) and only mounts or removes the rest,
so paging between versions of the last reply does not re-render the whole chat. The
reply being written is one extra view at the end that adopts its stored message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from textual.containers import VerticalScroll

from sessions.tree import Message
from tui.widgets.message_view import MessageView

STOP_NOTES = {"cancelled": "stopped", "length": "cut at the length limit", "context_full": "context full",
              "error": "failed"}


def message_note(message: Message) -> str:
    """The quiet note after a reply's header: its length and why it ended early."""
    if message.stats is None or message.role != "assistant":
        return ""
    note = f"{message.stats.tokens_generated} tokens"
    reason = STOP_NOTES.get(message.stats.stop_reason)
    return f"{note} · {reason}" if reason else note


class ConversationView(VerticalScroll):
    """Messages of the active branch; one of them may be selected."""

    DEFAULT_CSS = """
    ConversationView { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.selected_id: int | None = None

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

    async def show(self, path: Sequence[Message], positions: Mapping[int, tuple[int, int]]) -> None:
        """Display ``path``; ``positions`` maps message ids to ``(i, n)`` among siblings."""
        views = self.views
        keep = 0
        while keep < len(views) and keep < len(path) and views[keep].message_id == path[keep].id:
            keep += 1
        for view, message in zip(views[:keep], path[:keep], strict=True):
            await view.set_message(message, positions.get(message.id, (1, 1)), message_note(message))
        if views[keep:]:
            await self.remove_children(views[keep:])
        new = [MessageView(m, position=positions.get(m.id, (1, 1)), note=message_note(m)) for m in path[keep:]]
        if new:
            await self.mount_all(new)
        self.select(self.selected_id if self.view_for(self.selected_id or -1) else None)
        if new:
            self.scroll_end(animate=False, immediate=True)

    def select(self, message_id: int | None) -> None:
        """Highlight one message (None: no selection) and bring it into view."""
        self.selected_id = message_id
        for view in self.views:
            view.set_class(message_id is not None and view.message_id == message_id, "-selected")
        target = self.view_for(message_id) if message_id is not None else None
        if target is not None:
            self.scroll_to_widget(target, animate=False, immediate=True)

    async def begin_reply(self) -> MessageView:
        """Mount the view the next reply streams into and follow it down."""
        view = MessageView(None, role="assistant", note="writing…")
        await self.mount(view)
        view.begin_stream()
        self.anchor()
        return view

    async def drop_reply(self) -> None:
        """Remove the reply view when no reply was stored (an error or an early stop)."""
        view = self.reply_view
        if view is not None:
            await view.end_stream(None)
            await view.remove()
