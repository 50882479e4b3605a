"""The active branch, root first, as a scrolling column of ``MessageView``s.

Only the messages near the part shown have a view (``message_window``): a chat of
thousands of messages opens, scrolls and quits as fast as a short one. Two spacers above
and below the views stand for the other messages, as tall as they are, and the views
follow the scroll: when it comes near an end of them, the window moves and the message at
the top of the screen stays where it was. ``views`` are the views mounted now.

``show`` is called after every gesture; it keeps the views whose message is unchanged
(the common prefix of the old and the new branch) and only mounts or removes the rest,
so paging between versions of the last reply does not re-render the whole chat. The
reply being written is one extra view at the end that adopts its stored message.

Streamed text is held (``append_text``, ``streamed_text``) and drawn a few times a second;
``finish_stream`` drops what was not drawn yet, since the stored reply replaces it.
While the view follows the end of a long reply being written, the reply's blocks well
above its last screens leave the layout (``ChatMarkdown.fold_settled``); a scroll away from
the end or a new width brings them back first.

A find open marks the views holding its text (``set_marks``); a view mounted later, or
drawn again, is marked once its text is drawn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.dom import NoScreen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Markdown

from sessions.api.chat import ChatSnapshot
from sessions.tree import Message
from tui.safe_text import inert
from tui.widgets.find_marks import FindMarks, mark
from tui.widgets.message_actions import place_actions
from tui.widgets.message_note import message_note
from tui.widgets.message_view import MessageView, opened_in_reasoning
from tui.widgets.message_window import GAP, Heights, needs_moving, window_at_end, window_for
from tui.widgets.streamed_text import StreamedText
from tui.widgets.version_streams import VersionStreams

FOLD_SCREENS = 2
"""While the view follows a reply being written, its blocks more than this many screens
above its end leave the layout (``ChatMarkdown.fold_settled``)."""
FOLD_WHEN_QUIET = 0.5
"""Seconds after the last piece of a reply was drawn that its blocks are folded once more: a
fold measures the last layout, so when a reply pauses, the blocks drawn last would wait for a
layout that no next piece brings."""


def laid_out(view: MessageView) -> bool:
    """Whether ``view`` has its place in the layout. A view mounted just now may be drawn
    around before it has one (a busy machine): its place then reads as row 0, and a scroll
    to it would go to the top of the chat."""
    return bool(view.outer_size.height)


class MessageSpacer(Widget):
    """Stands for the messages of the branch above or below the views mounted."""

    DEFAULT_CSS = "MessageSpacer { height: 0; }"

    def set_rows(self, rows: int) -> None:
        if self.styles.height is None or self.styles.height.value != rows:
            self.styles.height = rows


class ConversationView(VerticalScroll):
    """Messages of the active branch; one of them may be selected."""

    DEFAULT_CSS = """
    ConversationView { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.selected_id: int | None = None
        self._streamed = StreamedText(self, self._draw_streamed)
        """Text of the reply being written not drawn yet."""
        self._quiet_fold: Timer | None = None
        """Folds the reply once more when no piece came for ``FOLD_WHEN_QUIET``."""
        self.reasoning_shown = False
        """Reasoning is drawn whole (dimmed) in every reply, rather than folded."""
        self.keys: dict[str, str] = {}
        """How the footer writes the keys the messages mention (``continue-reply``, ``toggle-reasoning``)
        and those of the selected message's actions, by binding id."""
        self.actions_for: Callable[[Message], Sequence[str]] = lambda message: ()
        """The binding ids of the actions the selected message offers to a click (``message_actions``)."""
        self._path: list[Message] = []
        self._positions: Mapping[int, tuple[int, int]] = {}
        self._index: dict[int, int] = {}
        """Message id: its place in ``_path``."""
        self._heights = Heights()
        self._mounted: dict[int, MessageView] = {}
        """Place in ``_path``: its view, for the window mounted (consecutive places)."""
        self._versions: VersionStreams | None = None
        """The versions being written at once, when they are (``begin_versions``)."""
        self._reply: MessageView | None = None
        """The view of the reply being written, after every other; it keeps the stored reply
        it adopts until ``show`` takes it in the branch."""
        self._above, self._below = MessageSpacer(), MessageSpacer()
        self._moving = asyncio.Lock()
        """Held while the views mounted change: one change at a time."""
        self._check_due = False
        self._keeping = False
        """The scroll is to be set back on the message shown before the window moved."""
        self._width = 0
        self.marks: FindMarks | None = None
        """What the find open marks (None: no find open)."""
        self.title_shown: str | None = None
        """The title drawn over the messages (None: no chat open)."""

    def compose(self) -> ComposeResult:
        yield self._above
        yield self._below

    @property
    def views(self) -> list[MessageView]:
        """The views mounted now, root first: the messages near the part shown (every one of
        a short branch), then the reply being written."""
        views = [self._mounted[i] for i in sorted(self._mounted)]
        return views + ([self._reply] if self._reply is not None else [])

    def view_for(self, message_id: int) -> MessageView | None:
        return next((view for view in self.views if view.message_id == message_id), None)

    @property
    def reply_view(self) -> MessageView | None:
        """The view of the reply being written, if any."""
        return self._reply if self._reply is not None and self._reply.message_id is None else None

    @property
    def window(self) -> tuple[int, int]:
        """The places ``[lo, hi)`` in the branch of the messages mounted."""
        if not self._mounted:
            return 0, 0
        return min(self._mounted), max(self._mounted) + 1

    @property
    def window_settled(self) -> bool:
        """No move of the window is due or under way."""
        return not (self._check_due or self._keeping or self._moving.locked())

    async def show_chat(self, snapshot: ChatSnapshot | None) -> None:
        """Show the active branch of ``snapshot`` and its title (or that no chat is open)."""
        if snapshot is None:
            await self.show([], {})
        else:
            await self.show(snapshot.path, snapshot.positions())
        self.show_title(snapshot)

    def show_title(self, snapshot: ChatSnapshot | None, title: str | None = None) -> None:
        """The chat's title over the messages (``title``: read since ``snapshot`` was taken)."""
        self.title_shown = None if snapshot is None else title if title is not None else snapshot.title
        shown = "no chat open" if self.title_shown is None else inert(self.title_shown) or "New chat"
        self.border_title = Text(shown)

    async def show(self, path: Sequence[Message], positions: Mapping[int, tuple[int, int]]) -> None:
        """Display ``path``; ``positions`` maps message ids to ``(i, n)`` among siblings."""
        async with self._moving:
            keep = await self._take_branch(path, positions)
            index = self._index.get(self.selected_id) if self.selected_id is not None else None
            if index is None:
                self.selected_id = None
            jump = index is not None and (index >= keep or not keep)
            if index is not None and jump:
                # The gesture replaced the selected message under a kept part of the branch (paged
                # its versions, chose it in the tree), or opened a chat at it: its header stays
                # in view once laid out, not the end of the branch below.
                await self._bring_near(index, header=bool(keep))
            elif len(path) > keep:
                await self._mount_window(*window_at_end(self._heights, self._screen_rows()))
                self.anchor()  # new messages lay out after this: stay at the end as they do
            self._mark_selected()
            if index is not None and not jump:
                selected = self._mounted.get(index)
                if selected is not None:
                    self.scroll_to_widget(selected, animate=False, immediate=True)
                elif len(path) == keep:
                    await self._bring_near(index)
        self._check_soon()

    async def _take_branch(self, path: Sequence[Message], positions: Mapping[int, tuple[int, int]]) -> int:
        """Make ``path`` the branch held; the views of the places it keeps stay (updated), the
        others go. Returns how many messages of the old branch it keeps."""
        old = [m.id for m in self._path]
        reply, self._reply = self._reply, None
        adopted = reply is not None and reply.message is not None and self.window[1] == len(self._path)
        if adopted and reply is not None and reply.message_id is not None:
            old.append(reply.message_id)
        keep = 0
        while keep < len(old) and keep < len(path) and old[keep] == path[keep].id:
            keep += 1
        gone = [self._mounted.pop(i) for i in sorted(self._mounted) if i >= keep]
        if reply is not None and adopted and keep > len(self._path):
            # The stored reply the view adopted: kept as it is, and drawn as the message it now
            # is. It was mounted after the spacer below (a reply follows every message of the
            # branch); left there, the messages mounted next (before that spacer) would be
            # drawn above it.
            self._mounted[len(self._path)] = reply
            self.move_child(reply, before=self._below)
        elif reply is not None:
            gone.append(reply)
        measured = min(keep, len(self._heights))
        self._heights.replace_from(measured, [m.text for m in path[measured:]], self._text_width())
        self._path, self._positions = list(path), positions
        self._index = {m.id: i for i, m in enumerate(path)}
        for place, view in self._mounted.items():
            message = path[place]
            await view.set_message(message, positions.get(message.id, (1, 1)), self.note(message))
        if gone:
            await self.remove_children(gone)
        self._set_spacers()
        return keep

    def note(self, message: Message) -> str:
        return message_note(message, self.keys.get("continue-reply", ""))

    def _view(self, message: Message | None, position: tuple[int, int] = (1, 1), note: str = "") -> MessageView:
        view = MessageView(message, position=position, note=self.note(message) if message else note)
        view.reasoning_shown, view.reasoning_key = self.reasoning_shown, self.keys.get("toggle-reasoning", "")
        if message is not None and message.id == self.selected_id:
            view.add_class("-selected")
        return view

    # -- the window of views -------------------------------------------------------------

    def _screen_rows(self) -> int:
        return self.scrollable_content_region.height or self.app.size.height or 24

    def _text_width(self) -> int:
        """Columns of a message's text: the view's, less a message's border and padding."""
        return max((self.scrollable_content_region.width or self.app.size.width or 80) - 3, 8)

    def _set_spacers(self) -> None:
        lo, hi = self.window if self._mounted else (len(self._path), len(self._path))
        self._above.set_rows(self._heights.tops[lo])
        self._below.set_rows(self._heights.total - self._heights.tops[hi])

    async def _mount_window(self, lo: int, hi: int) -> None:
        """Mount the views of places ``[lo, hi)`` and remove the others."""
        gone = [self._mounted.pop(i) for i in sorted(self._mounted) if not lo <= i < hi]
        if gone:
            await self.remove_children(gone)
        kept = sorted(self._mounted)
        new = [i for i in range(lo, hi) if i not in self._mounted]
        head = [i for i in new if kept and i < kept[0]]
        tail = [i for i in new if not kept or i > kept[-1]]
        for places, where in ((head, {"after": self._above}), (tail, {"before": self._below})):
            views = [self._view(self._path[i], self._positions.get(self._path[i].id, (1, 1))) for i in places]
            self._mounted.update(zip(places, views, strict=True))
            if views:
                await self.mount_all(views, **where)
        if new:
            self._mark_selected()
        self._set_spacers()

    async def _bring_near(self, index: int, *, header: bool = False) -> None:
        """Mount the window around place ``index`` and scroll to it once it is laid out: to its
        header, as little as will show it (``header``), else to its top."""
        if self.following_end and self._heights.total <= self._screen_rows():
            # A branch shorter than the screen is drawn against its end (the anchor): all of it
            # is in view already, and moving it to the top would make it jump.
            await self._mount_window(0, len(self._path))
            self._after_refresh(self._keep_in_view, index, header)
            return
        self.anchor(False)
        if self.scroll_y < 0:  # Textual's anchor over a branch shorter than the screen leaves it so
            self.scroll_to(y=0, animate=False, immediate=True, force=True)
        top, rows = self._heights.tops[index], self._screen_rows()
        await self._mount_window(*window_for(self._heights, top, rows))
        if self.window != (0, len(self._path)) and not self.scroll_y <= top < self.scroll_y + rows:
            # Where its rows say it starts, at once: a look at the window due before the
            # layout must not find the scroll where it was and move the window back there
            # (a branch mounted whole has no window to move).
            self.scroll_to(y=top, animate=False, immediate=True)
        view = self._mounted[index]
        # Once laid out, and at once then: a look at the window after that refresh must find
        # the scroll where the message is, not where it was.
        if header:
            self._after_refresh(self._scroll_to_view, view, view.header, top=False)
        else:
            self._after_refresh(self._scroll_to_view, view, view, top=True)

    def _keep_in_view(self, index: int, header: bool) -> None:
        """Once a short branch is laid out: if it came out taller than the screen after all
        (its rows were estimated), bring place ``index`` into view as a long one would."""
        view = self._mounted.get(index)
        if view is None or not view.is_attached:
            return
        if not laid_out(view):
            self._after_refresh(self._keep_in_view, index, header)
            return
        if self.max_scroll_y > 0:
            self.anchor(False)
            self._scroll_to_view(view, view.header if header else view, top=not header)

    def _scroll_to_view(self, view: MessageView, part: Widget, *, top: bool) -> None:
        """Scroll to ``part`` of ``view`` once the view is laid out (taken off meanwhile: nothing to do)."""
        if not view.is_attached:
            return
        if not laid_out(view):
            self._after_refresh(self._scroll_to_view, view, part, top=top)
            return
        self.scroll_to_widget(part, animate=False, top=top, immediate=True)

    def _measure(self) -> None:
        rows = {place: view.outer_size.height + GAP for place, view in self._mounted.items() if view.outer_size.height}
        self._heights.measure(rows)

    def _after_refresh(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Run ``callback`` once this view's screen is laid out and drawn.

        Not ``call_after_refresh``: that hands the callback to the screen on top when it
        runs, and a dialog closing at that moment (the chat opened from the picker) drops
        it, leaving the window where it was or the message found out of view.
        """
        try:
            screen = self.screen
        except NoScreen:  # taken off the screen (the app ends): nothing left to lay out
            return
        screen._invoke_later(partial(callback, *args, **kwargs), self)

    def _check_soon(self) -> None:
        """Look at the window once the screen is drawn (the scroll moved, or what is shown)."""
        if not self._check_due:
            self._check_due = True
            self._after_refresh(self._check_window)

    async def _check_window(self) -> None:
        """Move the window when the part shown comes near an end of it; the message at the
        top of the screen stays where it is drawn."""
        self._check_due = False
        if self._moving.locked():
            return  # whoever holds it looks again when done
        async with self._moving:
            self._measure()
            top, rows = self.scroll_y, self._screen_rows()
            if not needs_moving(self._heights, self.window, top, rows):
                return
            place = self._heights.index_at(top)
            offset = top - self._heights.tops[place]
            await self._mount_window(*window_for(self._heights, top, rows))
            if not self.is_anchored or self._anchor_released:  # anchored, the end stays in view by itself
                self._keeping = True
                self._after_refresh(self._keep_at, place, offset, top)
        self._check_soon()

    def _keep_at(self, place: int, offset: float, top: float) -> None:
        """Scroll so the message at ``place`` starts ``offset`` rows above the screen's top,
        unless the scroll moved since it was at ``top`` (a key or the wheel meanwhile): a
        smaller chat can only have brought it back to its end."""
        view = self._mounted.get(place)
        if view is not None and not laid_out(view):
            self._after_refresh(self._keep_at, place, offset, top)
            return
        self._keeping = False
        moved = self.scroll_y != top and not (top > self.scroll_y == self.max_scroll_y)
        if view is not None and not moved:
            self._measure()
            self.scroll_to(y=view.virtual_region.y + offset, animate=False, immediate=True)

    def scroll_end(self, *args: Any, on_complete: Callable[[], Any] | None = None, **kwargs: Any) -> None:
        """Scroll to the end, and look at the window once there: anchored, Textual's layout
        may put the scroll at the end itself, before the scroll asked for and without
        telling ``watch_scroll_y`` (the scroll then finds nothing to move), which left the
        window of the middle of a long chat mounted and the end blank."""

        def done() -> None:
            self._check_soon()
            if on_complete is not None:
                self.call_next(on_complete)

        super().scroll_end(*args, on_complete=done, **kwargs)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if not self.following_end or new_value < old_value:  # anything above the end may show
            self._unfold_reply()
        self._check_soon()

    def on_resize(self) -> None:
        """A new width wraps every message anew: the rows held are estimated again, and the
        message at the top of the screen stays there (at the end, the end stays)."""
        self._unfold_reply()
        width = self._text_width()
        if width != self._width and self._path:
            top = self.scroll_y
            place = self._heights.index_at(top)
            offset = top - self._heights.tops[place]
            self._width = width
            self._heights.estimate_again([m.text for m in self._path], width)
            self._set_spacers()
            if place in self._mounted and (not self.is_anchored or self._anchor_released):
                self._keeping = True
                self._after_refresh(self._keep_at, place, min(offset, self._heights.rows[place] - 1), top)
        self._width = width
        self._check_soon()

    # -- selection and reasoning ---------------------------------------------------------

    def set_reasoning_shown(self, shown: bool) -> None:
        """Draw every reply's reasoning whole and dimmed, or folded to one line."""
        self.reasoning_shown = shown
        for view in self.views:
            view.set_reasoning_shown(shown)
        self._check_soon()

    def _mark_selected(self) -> None:
        """Mark the selected message's view and give it its actions (every other view loses
        them); called again whenever views are mounted, so a view scrolled away and back
        keeps them."""
        for view in self.views:
            selected = self.selected_id is not None and view.message_id == self.selected_id
            view.set_class(selected, "-selected")
            message = view.message
            place_actions(view, self.actions_for(message) if selected and message is not None else (), self.keys)

    def select(self, message_id: int | None) -> None:
        """Highlight one message (None: no selection) and bring it into view."""
        self.selected_id = message_id
        self._mark_selected()
        target = self.view_for(message_id) if message_id is not None else None
        if target is not None:
            self.scroll_to_widget(target, animate=False, immediate=True)
        elif message_id is not None and message_id in self._index:
            self.call_later(self._jump_to, message_id)

    async def _jump_to(self, message_id: int) -> None:
        """Bring a message of the branch that has no view yet into view, selected."""
        async with self._moving:
            index = self._index.get(message_id)
            if index is not None and message_id == self.selected_id:
                await self._bring_near(index)
                self._mark_selected()
        self._check_soon()

    # -- what a find marks ----------------------------------------------------------------

    def set_marks(self, marks: FindMarks | None) -> None:
        """Mark the messages holding the text found, and the one the find is at (None: unmark)."""
        self.marks = marks
        for view in self.views:
            mark(view, marks)

    def on_markdown_table_of_contents_updated(self, event: Markdown.TableOfContentsUpdated) -> None:
        """A message's text was drawn (a view mounted as the window moved, a text changed):
        its marks are drawn again over it."""
        if self.marks is None:
            return
        view = next((node for node in event.markdown.ancestors if isinstance(node, MessageView)), None)
        if view is not None:
            mark(view, self.marks)

    # -- the reply being written ---------------------------------------------------------

    async def begin_reply(self, continued: Message | None = None) -> MessageView:
        """Mount the view the next reply streams into and follow it down.

        With ``continued`` the reply goes on from that message: its view (and any after it)
        gives way to one that starts with its text.
        """
        async with self._moving:
            at = self._index.get(continued.id, len(self._path)) if continued is not None else len(self._path)
            if at < len(self._path):  # the reply, and what followed it on this branch
                await self._take_branch(self._path[:at], self._positions)
            await self._mount_window(*window_at_end(self._heights, self._screen_rows()))
            view = self._view(None, note="continuing…" if continued else "writing…")
            self._reply = view
            await self.mount(view)
            view.begin_stream(opens_in_reasoning=opened_in_reasoning(continued))
            if continued is not None:
                await view.write(inert(continued.text))  # stored model text: drawn inert like the rest
            self.anchor()
        self._check_soon()
        return view

    async def begin_versions(self, count: int) -> MessageView:
        """Mount the view ``count`` versions written at once stream into; it shows one of
        them at a time (``page_versions``), the first to begin with."""
        view = await self.begin_reply()
        self._versions = VersionStreams(count)
        view.set_position((1, count), "writing…")
        return view

    @property
    def shown_version(self) -> int:
        """The index of the version shown while several are written (0 when they are not)."""
        return self._versions.shown if self._versions is not None else 0

    async def page_versions(self, delta: int) -> bool:
        """Show another of the versions being written, ``delta`` away (clamped at the ends);
        False when none are being written."""
        versions, view = self._versions, self.reply_view
        if versions is None or view is None:
            return False
        if versions.page(delta):
            self._streamed.forget()
            await view.restart_stream(versions.text(), opens_in_reasoning=versions.opens_in_reasoning)
            view.set_position((versions.shown + 1, versions.count), "writing…")
        return True

    def append_text(self, text: str, *, opens_in_reasoning: bool = False, version: int | None = None) -> None:
        """More text of the reply being written; drawn at most ``STREAM_INTERVAL`` later.

        ``opens_in_reasoning``: the reply began inside reasoning (``TextStreamed``).
        ``version``: which of several written at once; only the one shown is drawn.
        """
        versions = self._versions
        if version is not None and versions is not None and not versions.add(version, text,
                                                                              opens_in_reasoning=opens_in_reasoning):
            return
        self._streamed.add(text, opens_in_reasoning=opens_in_reasoning)

    async def _draw_streamed(self, text: str, opens_in_reasoning: bool) -> None:
        view = self.reply_view
        if view is not None:
            await view.write(text, opens_in_reasoning=opens_in_reasoning)
            if self.following_end:  # only the end can be seen: what is well above it leaves the layout
                await view.body.fold_settled(FOLD_SCREENS * self._screen_rows())
            if self._quiet_fold is None:
                self._quiet_fold = self.set_timer(FOLD_WHEN_QUIET, self._fold_when_quiet)
            else:
                self._quiet_fold.reset()

    async def _fold_when_quiet(self) -> None:
        self._quiet_fold = None
        view = self.reply_view
        if view is not None and view.is_mounted and self.following_end:
            await view.body.fold_settled(FOLD_SCREENS * self._screen_rows())

    def _stop_quiet_fold(self) -> None:
        if self._quiet_fold is not None:
            self._quiet_fold.stop()
            self._quiet_fold = None

    @property
    def following_end(self) -> bool:
        """The view stays at the end of the branch as it grows (not scrolled away from it)."""
        return self.is_anchored and not self._anchor_released

    def _unfold_reply(self) -> None:
        """The whole reply being written back in the layout (``ChatMarkdown.fold_settled``)."""
        view = self.reply_view
        if view is not None and view.is_mounted:
            view.body.unfold()

    async def finish_stream(self, final: Message) -> None:
        """The reply is stored: its view shows the stored text (undrawn pieces are dropped)."""
        self._streamed.forget()
        self._stop_quiet_fold()
        self._versions = None
        view = self.reply_view
        if view is not None:
            await view.end_stream(final)

    async def drop_reply(self) -> None:
        """Remove the reply view when no reply was stored (an error or an early stop)."""
        self._streamed.forget()
        self._stop_quiet_fold()
        self._versions = None
        view = self.reply_view
        if view is not None:
            self._reply = None
            await view.end_stream(None)
            await view.remove()
