"""Side panels in a narrow terminal leave the chat room to be drawn.

The session list and the tree have minimum widths that suit a normal terminal; at 40
columns both together are wider than the screen, and at 30 the tree alone is. The chat
column was then squeezed to nothing, and the message box, drawing its placeholder in no
columns, raised an exception that ended the app. These tests open the panels where that
happened, and check that the chat is still drawn and still takes messages.
"""

from __future__ import annotations

import pytest

from tests.tui.helpers import ready, screen_text, send, settle, shown_texts


@pytest.mark.parametrize(("width", "keys"), [(40, ("ctrl+t", "ctrl+l")), (30, ("ctrl+t",)), (30, ("ctrl+l",))])
async def test_opening_side_panels_in_a_narrow_terminal_keeps_the_chat_usable(make_app, width, keys):
    app = make_app()
    async with app.run_test(size=(width, 20)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        assert screen_text(app)  # the whole screen can be drawn
        assert screen.chat_input.content_size.width > 0
        assert screen.conversation_view.content_size.width > 0
        await send(pilot, "still here")
        assert shown_texts(screen)[2] == ("user", "still here")
        assert app.is_running


async def test_a_terminal_made_narrow_with_both_panels_open_keeps_the_chat_usable(make_app):
    app = make_app()
    async with app.run_test(size=(100, 24)) as pilot:
        screen = await ready(pilot)
        await pilot.press("ctrl+t", "ctrl+l")
        await settle(pilot)
        await pilot.resize_terminal(40, 20)
        await settle(pilot)
        assert screen_text(app)
        assert screen.chat_input.content_size.width > 0
        assert screen.tree_panel.region.width > 0 and screen.session_list.region.width > 0
        await send(pilot, "after the resize")
        assert shown_texts(screen)[0] == ("user", "after the resize")
