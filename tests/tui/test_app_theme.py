"""Changing the theme from the palette restyles the chat and is remembered."""

from __future__ import annotations

from textual.color import Color
from textual.command import CommandList, CommandPalette

from sessions.config import load_config
from tests.tui.helpers import ready, send, type_text, wait_for
from tui.startup import StartupRequest


def user_background(screen) -> Color:
    view = next(v for v in screen.conversation_view.views if v.role == "user")
    return view.styles.background


async def test_a_theme_chosen_in_the_palette_restyles_messages_and_is_remembered(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        assert app.theme == "llamachat-dark"
        before = user_background(screen)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await type_text(pilot, "theme")
        await wait_for(pilot, lambda: app.screen.query_one(CommandList).option_count > 0, "the theme command")
        await pilot.press("enter")  # "Theme": the palette now lists themes
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette)
                       and app.screen.query_one(CommandList).option_count > 1, "the theme list")
        await type_text(pilot, "gruvbox-light")
        await wait_for(pilot, lambda: "gruvbox" in str(app.screen.query_one(CommandList)
                                                       .get_option_at_index(0).prompt), "the theme hit")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.theme == "gruvbox-light", "the theme to change")
        await pilot.pause()
        theme = app.get_theme("gruvbox-light")
        assert user_background(screen) != before
        assert user_background(screen) == Color.parse(theme.variables["user-message-background"].split()[0]) \
            .multiply_alpha(_alpha(theme.variables["user-message-background"]))
    assert load_config().config.theme == "gruvbox-light"

    again = make_app(startup=StartupRequest(), config=load_config().config)  # as the launcher does
    async with again.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        assert again.theme == "gruvbox-light"


def _alpha(value: str) -> float:
    parts = value.split()
    return float(parts[1].rstrip("%")) / 100 if len(parts) > 1 else 1.0
