"""Driving the app like a user: type, press, and wait for conditions (never for time)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable

from textual import events
from textual.keys import _character_to_key
from textual.pilot import Pilot
from textual.widgets import Static
from textual.worker import WorkerFailed

from tui.screens.chat_screen import ChatScreen
from tui.widgets.tree_panel import TreePanel

WAIT_SECONDS = 30.0
"""Longest a condition may take before the test fails (a deadline, not a count of
pauses: how long a pause takes depends on the machine's load)."""


async def wait_for(pilot: Pilot, condition: Callable[[], bool], what: str = "condition") -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause()


def main_screen(pilot: Pilot) -> ChatScreen:
    screen = pilot.app.screen
    if not isinstance(screen, ChatScreen):
        screen = next(s for s in pilot.app.screen_stack if isinstance(s, ChatScreen))
    return screen


async def settle(pilot: Pilot) -> ChatScreen:
    """Wait until no engine job runs and nothing waits for one."""
    screen = main_screen(pilot)
    await wait_for(pilot, lambda: screen.gestures.idle, "the engine to be idle")
    try:
        await pilot.app.workers.wait_for_complete()
    except WorkerFailed:  # an engine job that failed, still listed: the screen has said so (``job_failed``)
        pass
    await pilot.pause()
    return screen


async def ready(pilot: Pilot) -> ChatScreen:
    """Wait for the start-up model load to finish."""
    screen = main_screen(pilot)
    await wait_for(pilot, lambda: screen.jobs.model_ready, "the model to load")
    return await settle(pilot)


async def type_text(pilot: Pilot, text: str) -> None:
    """Type ``text`` as a terminal delivers it: its keys queued all at once, as one read of
    the terminal brings them, then a wait for the app to go idle (a line break is Ctrl+J).

    ``pilot.press`` waits for the app to go idle after every key; a typed message gives a
    terminal no such pauses, and the keys queued behind one another are what the input's
    Enter and Ctrl+J must keep their place among (``tui.widgets.chat_input``). Whatever a
    test does next is queued behind them too."""
    for char in text:
        if char == "\n":
            key = events.Key("ctrl+j", None)
        else:
            key = events.Key(char if char.isalnum() else _character_to_key(char), char)
        pilot.app.post_message(key)
    # An idle wait alone can end early on a loaded machine (a slice in which the process got
    # no processor looks idle), so first the keys' own way through: the app passes each one
    # on before it runs what was queued after them, then the widgets handle what they were
    # passed, as ``pilot.press`` ends with.
    passed_on = asyncio.Event()
    pilot.app.call_later(passed_on.set)
    await asyncio.wait_for(passed_on.wait(), WAIT_SECONDS)
    await pilot._wait_for_screen()
    await pilot.pause()


async def send(pilot: Pilot, text: str) -> ChatScreen:
    """Type ``text`` into the input, press enter, and wait for the reply to be stored."""
    screen = main_screen(pilot)
    screen.chat_input.focus()
    await type_text(pilot, text)
    await pilot.press("enter")
    return await settle(pilot)


def shown_texts(screen: ChatScreen) -> list[tuple[str, str]]:
    """(role, text) of every message on screen, root first."""
    return [(view.role, view.message.text) for view in screen.conversation_view.views if view.message]


def headers(screen: ChatScreen) -> list[str]:
    return [view.header_plain for view in screen.conversation_view.views]


def reply_text(screen: ChatScreen) -> str:
    """What the reply being written shows so far ("" when none is being written)."""
    view = screen.conversation_view.reply_view
    return (view.body.source or "") if view is not None else ""


def shown_cost(screen: ChatScreen) -> tuple[int, int]:
    """(restored, evaluated) of the last reply or switch, as the status bar shows it."""
    found = re.match(r"restored ([\d,]+)(?: tokens)?, evaluated ([\d,]+)", screen.status.text_of("last"))
    assert found, f"no cost in the status bar: {screen.status.text_of('last')!r}"
    restored, evaluated = (int(group.replace(",", "")) for group in found.groups())
    return restored, evaluated


def screen_text(app) -> list[str]:
    """The lines of the terminal as the app draws them now, as plain text."""
    strips = app.screen._compositor.render_strips()
    return ["".join(segment.text for segment in strip) for strip in strips]


async def start_reply_until_thinking(pilot: Pilot, text: str) -> ChatScreen:
    """Send ``text`` and wait until the reply being written shows its folded reasoning line
    saying the model is thinking (the fake engine holding the reply: ``hold_after``)."""
    from tui.widgets.reasoning_view import ReasoningView

    screen = main_screen(pilot)
    screen.chat_input.focus()
    await type_text(pilot, text)
    await pilot.press("enter")
    view = screen.conversation_view
    await wait_for(pilot, lambda: view.reply_view is not None
                   and "thinking…" in str(view.reply_view.query_one(ReasoningView).render()), "the thinking line")
    return screen


async def click_tree_line(pilot: Pilot, panel: TreePanel, line: int, x: int = 8) -> None:
    """Click line ``line`` of the tree panel's tree once the screen shows it there.

    A click acts on what is under the pointer when the app handles it, and as the panel
    is first shown its summary grows to two lines, moving the tree down; it also scrolls
    its cursor into view after a refresh. Aimed before the layout has caught up, a click
    lands on another line. (The cost line under the summary keeps its row.)
    """
    tree = panel.message_tree
    summary = panel.query_one("#tree-summary", Static)

    def painted() -> bool:
        if summary.region.height != str(summary.render()).count("\n") + 1:  # two short lines, never wrapped
            return False
        row = line - round(tree.scroll_y)
        if not 0 <= row < tree.scrollable_content_region.height:
            return False
        return pilot.app.screen.get_style_at(tree.region.x + x, tree.region.y + row).meta.get("line") == line

    await wait_for(pilot, painted, f"line {line} of the tree painted")
    await pilot.click(tree, offset=(x, line - round(tree.scroll_y)))
