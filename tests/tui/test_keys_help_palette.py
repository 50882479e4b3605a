"""Keys from the config, the help screen, and the command palette."""

from __future__ import annotations

from textual.command import CommandList, CommandPalette
from textual.widgets import DataTable

from sessions.config import Config
from tests.tui.helpers import headers, ready, send, settle, shown_texts, type_text, wait_for
from tui.bindings import KEYS, PALETTE
from tui.screens.help_screen import HelpScreen


async def test_help_lists_every_action_with_its_current_key(make_app):
    app = make_app(config=Config(keys={"regenerate": "ctrl+g"}))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        table = app.screen.query_one(DataTable)
        rows = [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]
        assert [row[2] for row in rows] == [spec.id for spec in (*KEYS, PALETTE)]
        regenerate = next(row for row in rows if row[2] == "regenerate")
        assert regenerate[0] == app.get_key_display(next(b for b in app.screen_stack[1].BINDINGS
                                                         if b.id == "regenerate").with_key("ctrl+g"))
        assert regenerate[1] == "Regenerate"
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen), "the help screen to close")


async def test_a_rebound_key_runs_its_action(make_app):
    app = make_app(config=Config(keys={"regenerate": "ctrl+g"}))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        await pilot.press("ctrl+r")  # no longer bound
        await settle(pilot)
        assert "‹" not in headers(screen)[1]
        await pilot.press("ctrl+g")
        await settle(pilot)
        assert "‹ 2/2 ›" in headers(screen)[1]


async def test_a_bad_key_override_is_reported_not_fatal(make_app):
    app = make_app(config=Config(keys={"regenrate": "ctrl+g"}))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        assert any("regenrate" in n.message for n in app._notifications)


async def test_the_palette_runs_actions(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        first = shown_texts(screen)[1]
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await type_text(pilot, "regenerate")
        await wait_for(pilot, lambda: app.screen.query_one(CommandList).option_count > 0, "a palette hit")
        hits = app.screen.query_one(CommandList)
        assert "Regenerate" in str(hits.get_option_at_index(0).prompt)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette), "the palette to close")
        await settle(pilot)
        assert shown_texts(screen)[1] != first
        assert "‹ 2/2 ›" in headers(screen)[1]


async def test_the_palette_key_can_be_rebound_too(make_app):
    app = make_app(config=Config(keys={"command-palette": "f12"}))
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("f12")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")


async def test_the_palette_lists_llamachats_commands_not_textuals_generic_ones(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await wait_for(pilot, lambda: app.screen.query_one(CommandList).option_count > 10, "the commands listed")
        listed = app.screen.query_one(CommandList)
        titles = [str(listed.get_option_at_index(i).prompt).split("\n")[0] for i in range(listed.option_count)]
        assert not {"Keys", "Maximize", "Screenshot"} & {title.strip() for title in titles}
        assert any("Theme" in title for title in titles) and any("Regenerate" in title for title in titles)
