"""A deleted branch or chat comes back with Ctrl+Z (or the palette), as the toast says."""

from __future__ import annotations

from textual.widgets._toast import Toast

from tests.tui.helpers import ready, send, settle, shown_texts, wait_for
from tui.screens.dialogs import ConfirmScreen


def toasts(screen) -> list[str]:
    return [str(toast.render()) for toast in screen.query(Toast)]


async def test_a_deleted_branch_comes_back_with_the_key_the_toast_names(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        before = shown_texts(screen)
        await pilot.press("ctrl+up", "ctrl+up", "f8")  # "two" and its reply
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm dialog")
        await pilot.press("y")
        await wait_for(pilot, lambda: any("Deleted 2 messages. ^z brings it back." in t for t in toasts(screen)),
                       "the toast naming the undo key")
        assert len(shown_texts(screen)) == 2
        await pilot.press("ctrl+z")
        await wait_for(pilot, lambda: shown_texts(screen) == before, "the branch back on screen")
        await wait_for(pilot, lambda: any("Brought back 2 messages." in t for t in toasts(screen)), "the toast")
        await pilot.press("ctrl+z")  # nothing else was deleted
        await wait_for(pilot, lambda: any("Nothing deleted" in t for t in toasts(screen)), "the refusal")
        await settle(pilot)
        assert shown_texts(screen) == before


async def test_a_deleted_chat_comes_back_and_opens(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        screen = await ready(pilot)
        await send(pilot, "keep me")
        chat = screen.controller.session_id
        await pilot.press("ctrl+delete")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm dialog")
        question = str(app.screen.query_one("#dialog-question").render())
        assert question.endswith("on every branch? ^z brings it back.")  # no longer "cannot be undone"
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.controller.session_id != chat, "a new chat in its place")
        await pilot.press("ctrl+z")
        await wait_for(pilot, lambda: screen.controller.session_id == chat, "the chat open again")
        await wait_for(pilot, lambda: ("user", "keep me") in shown_texts(screen), "its messages shown")


async def test_ctrl_z_undoes_typing_first(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await pilot.press("ctrl+up", "ctrl+up", "f8")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm dialog")
        await pilot.press("y")
        await wait_for(pilot, lambda: len(screen.controller.snapshot().tree) == 0, "the chat emptied")
        screen.chat_input.focus()
        await pilot.press("h", "i")
        await pilot.press("ctrl+z")  # the typing goes, the deletion stays
        await wait_for(pilot, lambda: screen.chat_input.text == "", "the typing undone")
        await settle(pilot)
        assert len(screen.controller.snapshot().tree) == 0
        await pilot.press("ctrl+z")  # now the deletion
        await wait_for(pilot, lambda: len(screen.controller.snapshot().tree) == 2, "the messages back")
