"""A deleted branch or chat comes back with Ctrl+Z (or the palette), as the toast says."""

from __future__ import annotations

from textual.widgets._toast import Toast

from sessions.config import Config
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


async def test_enter_in_the_delete_question_deletes_since_undo_brings_it_back(make_app):
    """F8 then Enter: the focused button is Delete (it cancelled silently before)."""
    app = make_app()
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        screen = await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        await pilot.press("ctrl+up", "ctrl+up", "f8")  # "two" and its reply
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm dialog")
        assert "^z brings it back" in str(app.screen.query_one("#dialog-question").render())
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(shown_texts(screen)) == 2, "the branch deleted")


async def test_with_undo_off_enter_in_the_delete_question_cancels(fake_model, script):
    from sessions.api.chat import SessionController
    from sessions.sampling import SamplingSettings
    from sessions.store import SessionStore
    from tests.tui.fake_engine import FakeEngineFactory
    from tui.app import LlamaChatApp
    from tui.startup import StartupRequest

    with SessionStore.open() as store:
        controller = SessionController(store, engine_factory=FakeEngineFactory(script), undo_seconds=0,
                                       sampling=SamplingSettings(temperature=0.0))
        app = LlamaChatApp(controller, config=Config(undo_minutes=0), startup=StartupRequest(model_path=fake_model))
        async with app.run_test(size=(100, 30), notifications=True) as pilot:
            screen = await ready(pilot)
            await send(pilot, "one")
            await pilot.press("ctrl+up", "f8")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm dialog")
            assert "This cannot be undone." in str(app.screen.query_one("#dialog-question").render())
            await pilot.press("enter")
            await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "the dialog closed")
            assert len(shown_texts(screen)) == 2
