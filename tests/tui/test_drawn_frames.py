"""An app under test draws what a test reads and its last frame, not every update
(``tests.conftest._draw_what_is_read``): what is read is the state now, and a widget that
cannot draw still fails the test that leaves it on the screen."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from textual.widget import Widget
from textual.widgets import Static

from tests.tui.helpers import screen_text


class Fragile(Widget):
    """Draws a word, or fails to draw once told to."""

    broken = False

    def render(self) -> str:
        if self.broken:
            raise RuntimeError("this widget cannot draw")
        return "drawn"


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("before", id="words")
        yield Fragile()


async def test_the_screen_read_is_the_state_now():
    app = Host()
    async with app.run_test(size=(40, 6)) as pilot:
        assert "before" in screen_text(app)[0]
        app.query_one("#words", Static).update("after")
        await pilot.pause()
        assert "after" in screen_text(app)[0]


async def test_a_widget_that_cannot_draw_fails_the_test_that_leaves_it_shown():
    app = Host()
    with pytest.raises(RuntimeError, match="cannot draw"):
        async with app.run_test(size=(40, 6)) as pilot:
            fragile = app.query_one(Fragile)
            fragile.broken = True
            fragile.refresh()
            await pilot.pause()
