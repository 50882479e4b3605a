"""The tree's saved-state marks in the app: read from the controller in a worker, for the
messages the panel built, and drawn as RAM, disk or cold."""

from __future__ import annotations

from tests.tui.helpers import ready, send, settle
from tui.widgets.message_tree import COLD_MARK, DISK_MARK, SAVED_MARK


def tier_of(screen, message_id: int):
    node = screen.tree_panel._layout.nodes[message_id]
    return node.data.tier if node.data.tier_known else "unknown"


def mark_drawn(screen, message_id: int) -> str:
    tree = screen.tree_panel.message_tree
    node = screen.tree_panel._layout.nodes[message_id]
    return tree.render_label(node, tree.rich_style, tree.rich_style).plain[2]


async def test_the_marks_say_ram_disk_or_cold_as_the_engine_keeps_the_states(make_app):
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        engine = screen.controller._factory.engines[-1]
        engine.on_disk.add(min(engine.saved, key=len))  # the first question's state: moved to disk
        asked: list[list[int]] = []
        ask = screen.controller.routes.checkpoint_tiers

        def checkpoint_tiers(message_ids=None):
            asked.append(list(message_ids))
            return ask(message_ids)

        screen.controller.routes.checkpoint_tiers = checkpoint_tiers  # type: ignore[method-assign]
        await pilot.press("ctrl+t")
        await settle(pilot)
        question, reply, second, last = (m.id for m in screen.controller.snapshot().path)
        assert asked and sorted(asked[-1]) == sorted(screen.tree_panel.built_ids)
        assert [tier_of(screen, i) for i in (question, reply, second, last)] == ["disk", "ram", "ram", "ram"]
        assert mark_drawn(screen, question) == DISK_MARK and mark_drawn(screen, last) == SAVED_MARK

        edited = screen.controller.edit(second, "two, said again")  # a version never decoded
        await screen.show_head()
        await settle(pilot)
        assert tier_of(screen, edited.id) is None and mark_drawn(screen, edited.id) == COLD_MARK
        assert tier_of(screen, second) == "ram"


async def test_help_explains_the_tree_marks(make_app):
    from tests.tui.helpers import wait_for
    from tui.screens.help_screen import HelpScreen

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        legend = str(app.screen.query_one("#help-tree").render())
        assert all(f"{mark} {words}" in legend for mark, words in
                   ((SAVED_MARK, "the state after a message is in RAM"), (DISK_MARK, "on disk"),
                    (COLD_MARK, "saved nowhere")))
        assert "Enter or a second click goes there" in legend


async def test_delete_on_a_line_that_stands_for_messages_not_drawn_asks_for_a_message(make_app, monkeypatch):
    from tests.tui.helpers import wait_for
    from tui.screens.dialogs import ConfirmScreen
    from tui.widgets import tree_layout

    monkeypatch.setattr(tree_layout, "RUN_PAGE", 2)  # a chat of four messages is a long run
    monkeypatch.setattr(tree_layout, "RUN_AFTER", 1)
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        await pilot.press("ctrl+t")
        await settle(pilot)
        assert len(screen.tree_panel.built_ids) == 2
        screen.tree_panel.focus()
        await pilot.press("home")
        assert screen.tree_panel.cursor_message_id is None
        await pilot.press("f8")
        await wait_for(pilot, lambda: any("cursor on a message" in n.message for n in app._notifications),
                       "the notice")
        assert not isinstance(app.screen, ConfirmScreen)
        assert len(screen.controller.snapshot().tree) == 4  # nothing deleted
