"""Typed text always lands in the message box or is kept: panels, new chats and edits."""

from __future__ import annotations

from tests.tui.helpers import ready, send, settle, shown_texts, type_text, wait_for
from tui.widgets.chat_input import ChatInput


async def test_after_enter_in_the_tree_the_next_words_go_to_the_message_box(make_app):
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        await pilot.press("ctrl+t", "up", "up", "enter")
        await settle(pilot)
        assert isinstance(app.focused, ChatInput)
        await type_text(pilot, "three")
        await pilot.press("enter")
        await settle(pilot)
        assert ("user", "three") in shown_texts(screen)


async def test_escape_and_typing_in_a_panel_bring_the_focus_back(make_app):
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await pilot.press("ctrl+t")
        assert not isinstance(app.focused, ChatInput)
        await pilot.press("escape")
        assert isinstance(app.focused, ChatInput)
        await pilot.press("ctrl+l")  # the session list
        assert not isinstance(app.focused, ChatInput)
        await type_text(pilot, "typed here")  # in one burst: the space arrives before the focus
        assert isinstance(app.focused, ChatInput) and screen.chat_input.text == "typed here"
        screen.session_list.focus()  # the list is still open: back to it
        await pilot.pause()
        assert not isinstance(app.focused, ChatInput)
        await pilot.press("space")  # typing is not moving now: a space alone is the panel's
        assert not isinstance(app.focused, ChatInput) and screen.chat_input.text == "typed here"


async def test_a_new_chat_from_the_session_list_takes_what_is_typed(make_app):
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "in the first chat")
        first = screen.controller.session_id
        await pilot.press("ctrl+l", "ctrl+n")
        await settle(pilot)
        await type_text(pilot, "hello")
        await pilot.press("enter")
        await settle(pilot)
        assert screen.controller.session_id not in (None, first)
        assert shown_texts(screen)[0] == ("user", "hello")
        assert len(screen.controller.library.list_sessions()) == 2


async def test_an_edit_keeps_the_unsent_draft_and_gives_it_back(make_app):
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "first")
        screen.chat_input.focus()
        await type_text(pilot, "half a thought")
        await pilot.press("ctrl+up", "ctrl+up", "f2")
        assert screen.chat_input.text == "first" and screen.mode.kind == "edit"
        await pilot.press("escape")
        assert screen.chat_input.text == "half a thought" and screen.mode.kind == "send"

        await pilot.press("ctrl+up", "ctrl+up", "f2")
        await type_text(pilot, " again")
        await pilot.press("enter")
        await settle(pilot)
        assert shown_texts(screen)[0] == ("user", "first again")
        await wait_for(pilot, lambda: screen.chat_input.text == "half a thought", "the draft back")
