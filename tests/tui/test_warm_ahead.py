"""The tree's cursor resting on a message warms its branch ahead; moving on stops that.

The rest is a Textual timer: the tests make it long, so that it never fires on its own,
and call its callback themselves (``WarmAhead.rested``)."""

from __future__ import annotations

import threading

import pytest

from tests.tui.helpers import ready, send, settle, wait_for
from tests.tui.test_tree_marks import mark_drawn, tier_of
from tui import warm_ahead
from tui.widgets.message_tree import DISK_MARK, SAVED_MARK


@pytest.fixture(autouse=True)
def long_rest(monkeypatch):
    monkeypatch.setattr(warm_ahead, "REST_SECONDS", 3600.0)


async def forked(pilot):
    """Two questions answered, the first then edited: the old branch's states all on disk."""
    screen = await ready(pilot)
    await send(pilot, "one")
    await send(pilot, "two")
    engine = screen.controller._factory.engines[-1]
    old = [m.id for m in screen.controller.snapshot().path]
    screen.controller.edit(old[0], "one, said again")
    await screen.show_head()
    engine.on_disk.update(engine.saved)
    await pilot.press("ctrl+t")
    await settle(pilot)
    return screen, engine, old


async def warm_started(pilot, screen, engine, message_id: int) -> None:
    """The tree's cursor moved to ``message_id`` and rested there: its warm has begun."""
    panel = screen.tree_panel
    panel.message_tree.move_cursor(panel._layout.nodes[message_id])
    await wait_for(pilot, lambda: screen.warm_ahead.resting_on == message_id, "the rest timer")
    screen.warm_ahead.rested()
    await wait_for(pilot, engine.warming.is_set, "the warm to start")


async def test_the_cursor_resting_on_a_message_warms_its_branch_and_the_mark_turns_ram(make_app):
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen, engine, old = await forked(pilot)
        last = old[-1]
        assert tier_of(screen, last) == "disk"
        panel = screen.tree_panel
        panel.message_tree.move_cursor(panel._layout.nodes[last])
        await wait_for(pilot, lambda: screen.warm_ahead.resting_on == last, "the rest timer")
        assert not engine.warms  # nothing is read while the cursor only passes

        screen.warm_ahead.rested()
        await wait_for(pilot, lambda: bool(engine.warms), "the warm")
        target, warmed = engine.warms[-1]
        assert not warmed.stopped and warmed.segments == 4
        assert engine.detokenize(target).count("two") == 1  # the old branch, not the one shown
        await wait_for(pilot, lambda: tier_of(screen, last) == "ram", "the mark to be read again")
        assert mark_drawn(screen, last) == SAVED_MARK
        assert all(tier_of(screen, i) == "ram" for i in old)


async def test_moving_the_cursor_stops_the_warm_and_the_mark_stays_disk(make_app, script):
    script.warm_gate = threading.Event()  # never set: the warm runs until it is stopped
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen, engine, old = await forked(pilot)
        await warm_started(pilot, screen, engine, old[-1])

        panel = screen.tree_panel
        panel.message_tree.move_cursor(panel._layout.nodes[old[0]])  # the cursor moves on

        await wait_for(pilot, lambda: bool(engine.warms), "the warm to stop")
        assert engine.warms[-1][1].stopped and engine.warms[-1][1].segments == 0
        await settle(pilot)
        assert tier_of(screen, old[-1]) == "disk" and mark_drawn(screen, old[-1]) == DISK_MARK
        assert screen.warm_ahead.resting_on == old[0]  # the next rest is timed


async def test_a_job_stops_the_warm_first(make_app, script):
    script.warm_gate = threading.Event()
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen, engine, old = await forked(pilot)
        await warm_started(pilot, screen, engine, old[-1])

        await pilot.press("enter")  # go there: the switch's job stops the warm rather than wait for it

        await wait_for(pilot, lambda: bool(engine.warms), "the warm to stop")
        assert engine.warms[-1][1].stopped
        await settle(pilot)
        assert screen.controller.snapshot().head.id == old[-1]
        assert len(engine.warms) == 1


@pytest.mark.parametrize("tree_open", [False, True])
async def test_paging_warms_the_version_the_next_page_shows(make_app, script, tree_open):
    script.replies = ["first version", "second version", "third version"]
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "tell me")
        for _ in range(2):
            await pilot.press("ctrl+r")
            await settle(pilot)
        engine = screen.controller._factory.engines[-1]
        engine.on_disk.update(engine.saved)
        first = screen.controller.snapshot().tree.siblings(screen.controller.snapshot().head.id)[0]
        if tree_open:  # its cursor follows the head the page moves, and must not take the rest over
            await pilot.press("ctrl+t")
            await settle(pilot)
            screen.chat_input.focus()

        await pilot.press("alt+left")  # the second version: the first is the next page that way
        await settle(pilot)

        await wait_for(pilot, lambda: screen.warm_ahead.resting_on == first.id, "the rest timer")
        screen.warm_ahead.rested()
        await wait_for(pilot, lambda: bool(engine.warms), "the warm")
        target, warmed = engine.warms[-1]
        assert engine.detokenize(target).endswith("first version") and warmed.segments > 0
        assert screen.controller.snapshot().head.text == "second version"  # nothing switched


async def test_resting_on_the_head_reads_nothing(make_app):
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen, engine, _old = await forked(pilot)
        head = screen.controller.snapshot().head.id
        screen.warm_ahead.rest_on(head)
        screen.warm_ahead.rested()
        await settle(pilot)
        assert not engine.warms  # the branch shown is live


async def test_quitting_stops_the_warm(make_app, script):
    script.warm_gate = threading.Event()
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen, engine, old = await forked(pilot)
        await warm_started(pilot, screen, engine, old[-1])
        await pilot.press("ctrl+q")
    # The fake gives up only after HOLD_LIMIT_SECONDS: the end of the app must stop it first.
    assert engine.warm_ended.wait(10), "the warm went on after the app ended"
    assert engine.warms[-1][1].stopped
