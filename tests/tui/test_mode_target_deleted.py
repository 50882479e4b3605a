"""An edit or a fork ends with its message, or with its chat, as Esc would end it.

F2 and Ctrl+F put the input in a mode aimed at one message. When that message was then
deleted (F8 over it, or over a message above it), the input still said "Editing" or
"Forking", and every Enter was refused with "no message N in this conversation", with
nothing saying that Esc was the way out.

Leaving an edit for another chat (Ctrl+N, Ctrl+O, the session list) dropped the mode but
left the edited message's text in the input, ready to be sent into the other chat, and the
draft that F2 had promised to give back was lost.
"""

from __future__ import annotations

from pathlib import Path

from sessions.store import DatabaseReplaced
from tests.tui.helpers import ready, send, settle, shown_texts, type_text, wait_for
from tui.screens.dialogs import ConfirmScreen


async def delete_selected(pilot) -> None:
    await pilot.press("f8")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen), "the confirm dialog")
    await pilot.press("y")
    await settle(pilot)


def errors(app) -> list[str]:
    return [n.message for n in app._notifications if n.severity == "error"]


async def test_deleting_the_message_being_edited_ends_the_edit_and_gives_the_draft_back(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "first")
        await send(pilot, "second")
        await type_text(pilot, "my draft")
        await pilot.press("ctrl+up", "ctrl+up")  # "second"
        await pilot.press("f2")
        assert screen.mode.kind == "edit" and screen.chat_input.text == "second"
        await delete_selected(pilot)
        assert screen.mode.kind == "send"
        assert screen.chat_input.border_title is None
        assert screen.chat_input.text == "my draft"  # what was being written comes back, as after Esc
        await pilot.press("enter")
        await settle(pilot)
        assert shown_texts(screen)[2] == ("user", "my draft")
        assert errors(app) == []


async def test_deleting_the_reply_a_fork_starts_from_ends_the_fork(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "first")
        await send(pilot, "second")
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up")  # the first reply
        await pilot.press("ctrl+f")
        assert screen.mode.kind == "fork"
        await pilot.press("ctrl+up")  # "first": the fork's reply is below it
        await delete_selected(pilot)
        assert screen.mode.kind == "send" and screen.chat_input.border_title is None
        await send(pilot, "a fresh start")
        assert [role for role, _ in shown_texts(screen)] == ["user", "assistant"]
        assert shown_texts(screen)[0] == ("user", "a fresh start")
        assert errors(app) == []


async def test_deleting_another_branch_keeps_the_edit(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "first")
        await send(pilot, "second")
        await pilot.press("ctrl+up")  # the last reply
        await delete_selected(pilot)
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up", "f2")  # edit "first"
        assert screen.mode.kind == "edit" and screen.chat_input.text == "first"
        await pilot.press("ctrl+r")  # a regenerated reply changes the branch, not the edited message
        await settle(pilot)
        assert screen.mode.kind == "edit" and screen.chat_input.text == "first"


async def test_a_new_chat_during_an_edit_gives_the_draft_back(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "first")
        await type_text(pilot, "my draft")
        await pilot.press("ctrl+up", "ctrl+up", "f2")
        assert screen.chat_input.text == "first"
        await pilot.press("ctrl+n")
        await settle(pilot)
        assert screen.mode.kind == "send" and shown_texts(screen) == []
        assert screen.chat_input.text == "my draft"


async def test_opening_another_chat_during_an_edit_leaves_no_edited_text_behind(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "in the first chat")
        await pilot.press("ctrl+n")
        await settle(pilot)
        await send(pilot, "in the second chat")
        await pilot.press("ctrl+up", "ctrl+up", "f2")
        await pilot.press("ctrl+l")
        await settle(pilot)
        await pilot.press("down", "enter")  # the first chat, from the session list
        await settle(pilot)
        assert shown_texts(screen)[0] == ("user", "in the first chat")
        assert screen.mode.kind == "send" and screen.chat_input.text == ""


async def test_a_chat_that_cannot_be_read_keeps_the_edit_and_says_why(make_app, monkeypatch):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "first")
        await pilot.press("ctrl+up", "ctrl+up", "f2")
        assert screen.mode.kind == "edit"

        def replaced():
            raise DatabaseReplaced(Path("/somewhere/sessions.db"))

        monkeypatch.setattr(screen.controller, "snapshot", replaced)
        await screen.refresh_view()  # as after any gesture: the store fails here, not the screen
        assert screen.mode.kind == "edit" and screen.chat_input.text == "first"
        await wait_for(pilot, lambda: any(n.message.startswith("Could not read the chat: ")
                                          for n in app._notifications), "the refusal")
