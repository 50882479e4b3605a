"""A session database that cannot be read refuses in words; the app goes on.

Also: the status bar's model says which chat template it uses once the load has ended,
even though the core reports the model loaded before the controller holds it.
"""

from __future__ import annotations

import threading
from pathlib import Path

from sessions.config import Config
from sessions.controller import model_loading
from sessions.controller.library import SessionLibrary
from sessions.store import DatabaseReplaced
from tests.tui.helpers import ready, send, settle, type_text, wait_for
from tui.screens.dialogs import ConfirmScreen
from tui.startup import StartupRequest

REPLACED = DatabaseReplaced(Path("/somewhere/sessions.db"))


def messages(app) -> list[str]:
    return [n.message for n in app._notifications]


def replaced(*_args, **_kwargs):
    raise REPLACED


async def test_deleting_a_chat_when_the_list_cannot_be_read_says_why(make_app, monkeypatch):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "keep me")
        monkeypatch.setattr(screen.controller.library, "list_sessions", replaced)
        await pilot.press("ctrl+delete")
        await wait_for(pilot, lambda: any("replaced or moved" in m for m in messages(app)), "the refusal")
        assert not isinstance(app.screen, ConfirmScreen)
        assert any(m.startswith("Could not read the saved chats") for m in messages(app))
        assert app.is_running


async def test_a_start_that_cannot_read_the_last_chat_says_why_and_opens_a_new_one(make_app, fake_model,
                                                                                   monkeypatch):
    monkeypatch.setattr(SessionLibrary, "last_session_id", replaced)
    app = make_app(startup=StartupRequest(), config=Config(model=str(fake_model)))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        assert any("Could not read the saved chats" in m and "replaced or moved" in m for m in messages(app))
        assert screen.controller.model_info is not None and screen.controller.session_id is None


async def test_a_new_chat_shows_on_when_the_store_fails_right_after_saving_it(make_app, monkeypatch):
    """A new chat is saved with its first message; the store failing before its record was
    ever read back must not cost the screen its chat: the conversation keeps the record it
    saved (``Conversation.session`` falls back on it), so nothing is refused."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        monkeypatch.setattr(screen.controller._store, "get_session", replaced)
        screen.chat_input.focus()
        await type_text(pilot, "hello")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.controller.session_id is not None and screen.gestures.idle, "the reply")
        await settle(pilot)
        assert not [m for m in messages(app) if m.startswith("Could not read the chat: ")]
        assert screen.controller.snapshot().session.id == screen.controller.session_id
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert app.is_running and screen.tree_panel.has_class("-open")


async def test_the_model_in_the_status_bar_tells_its_chat_template_once_loaded(make_app, monkeypatch):
    """The UI hears ``ModelLoaded`` while the controller holds no engine yet: here always so."""
    heard = threading.Event()
    carry = model_loading.carry_legacy_tokens

    def after_the_ui_heard(store, info):
        assert heard.wait(30), "the UI never showed the model"
        return carry(store, info)

    monkeypatch.setattr(model_loading, "carry_legacy_tokens", after_the_ui_heard)
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = pilot.app.screen
        await wait_for(pilot, lambda: "Fake Model" in screen.status.text_of("model"), "the model's name")
        heard.set()
        await ready(pilot)
        await settle(pilot)
        tooltip = screen.query_one("#status-model").tooltip
        assert tooltip is not None and str(tooltip).startswith("Chat template: the built-in ChatML template")
        assert screen.status.text_of("context").startswith("ctx 0/")
