"""F5 in a chat that has a model: the picker takes typing, and changing the chat's model
asks first, saying what it costs; Enter presses "Switch", which the user chose in the
picker, and "New chat with it" leaves the chat with its own model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from textual.widgets import Button, Static

from sessions.store import SessionStore
from sessions.synth import make_model
from tests.tui.helpers import ready, send, settle, type_text, wait_for
from tui.screens.dialogs import ChoiceScreen
from tui.screens.model_picker import ModelPicker


@pytest.fixture
def other_model(tmp_path) -> Path:
    """A real GGUF file the picker can read (the fake engine loads anything)."""
    path = tmp_path / "elsewhere" / "other-model.gguf"
    path.parent.mkdir()
    shutil.copyfile(make_model("llama", "tiny"), path)
    return path


async def pick_by_path(pilot, path: Path) -> None:
    """F5, type the path (no Tab first), Enter."""
    await pilot.press("f5")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ModelPicker), "the model picker")
    await type_text(pilot, str(path))
    await pilot.press("enter")


def loaded_path(app) -> Path | None:
    info = app.controller.model_info
    return Path(info.path) if info is not None else None


async def test_changing_a_chats_model_asks_first_saying_what_it_costs(make_app, fake_model, other_model):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "Say hi.")
        session_id = screen.controller.session_id
        tokens = screen.controller.context_used()
        await pick_by_path(pilot, other_model)
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceScreen), "the question")
        question = str(app.screen.query_one("#dialog-question", Static).render())
        assert "Switch this chat from Fake Model 1B to other-model.gguf" in question
        assert f"the {tokens:,} tokens of this branch are read again" in question
        assert isinstance(app.focused, Button) and app.focused.id == "choice-switch"
        assert loaded_path(app) == fake_model  # nothing loaded before the answer
        await pilot.press("enter")
        await wait_for(pilot, lambda: loaded_path(app) == other_model, "the new model")
        await settle(pilot)
        assert screen.controller.session_id == session_id
    with SessionStore.open() as store:
        assert store.get_session(session_id).model_to_reopen == str(other_model)


async def test_a_new_chat_with_the_model_leaves_the_chat_its_own(make_app, fake_model, other_model):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "Say hi.")
        session_id = screen.controller.session_id
        await pick_by_path(pilot, other_model)
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceScreen), "the question")
        await pilot.click("#choice-new")
        await wait_for(pilot, lambda: loaded_path(app) == other_model, "the new model")
        await settle(pilot)
        assert screen.controller.snapshot().path == ()  # a new chat, empty
    with SessionStore.open() as store:
        assert store.get_session(session_id).model_to_reopen == str(fake_model)


async def test_escape_keeps_the_model(make_app, fake_model, other_model):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await send(pilot, "Say hi.")
        await pick_by_path(pilot, other_model)
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceScreen), "the question")
        await pilot.press("escape")
        await settle(pilot)
        assert loaded_path(app) == fake_model and len(app.controller._factory.engines) == 1


async def test_a_chat_with_nothing_written_changes_model_unasked(make_app, fake_model, other_model):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pick_by_path(pilot, other_model)
        await wait_for(pilot, lambda: loaded_path(app) == other_model, "the new model")
