"""Sampling presets in the app: a new chat with a model starts with its recommended
settings, the settings dialog says where each value came from, and a preset of the
user's fills the values it names."""

from __future__ import annotations

import pytest
from textual.widgets import Input, Select

from sessions.api.chat import SessionController
from sessions.config import Config
from sessions.store import SessionStore
from sessions.synth import make_model
from tests.tui.fake_engine import FakeEngineFactory
from tests.tui.helpers import ready, settle, wait_for
from tests.tui.test_main_snapshots import SIZE
from tui.app import LlamaChatApp
from tui.screens.settings_dialog import ChatSettingsScreen
from tui.startup import StartupRequest

PRESETS = {"precise": {"temperature": 0.2, "top_p": 0.9}}


@pytest.fixture
def gemma_app(script):
    """The fake engine over a real Gemma 3 file (its header names the family), and a config
    that leaves [sampling] at the built-in defaults."""
    with SessionStore.open() as store:
        controller = SessionController(store, engine_factory=FakeEngineFactory(script))
        yield LlamaChatApp(controller, config=Config(presets=PRESETS),
                           startup=StartupRequest(model_path=make_model("gemma3", "tiny")))


async def open_settings(pilot) -> ChatSettingsScreen:
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ChatSettingsScreen), "the settings dialog")
    await pilot.pause()
    return pilot.app.screen


async def choose_preset(pilot, dialog: ChatSettingsScreen, name: str) -> None:
    dialog.query_one("#settings-preset", Select).value = name
    await wait_for(pilot, lambda: dialog.source_of("temperature") == f"preset {name}", "the preset applied")


async def test_a_new_chat_starts_with_the_models_settings_and_says_so(gemma_app):
    app = gemma_app
    async with app.run_test(size=(100, 32)) as pilot:
        screen = await ready(pilot)
        sampling = screen.controller.chat_settings().sampling
        assert (sampling.temperature, sampling.top_k, sampling.top_p) == (1.0, 64, 0.95)
        dialog = await open_settings(pilot)
        assert dialog.query_one("#settings-temperature", Input).value == "1"
        assert dialog.source_of("temperature") == "Gemma 3's recommended"
        assert dialog.source_of("max_tokens") == "built-in default"
        dialog.query_one("#settings-seed", Input).value = "5"
        await wait_for(pilot, lambda: dialog.source_of("seed") == "this chat", "the typed value's source")


async def test_a_users_preset_fills_the_values_it_names_and_is_saved(gemma_app):
    app = gemma_app
    async with app.run_test(size=(100, 32)) as pilot:
        screen = await ready(pilot)
        dialog = await open_settings(pilot)
        await choose_preset(pilot, dialog, "precise")
        assert dialog.query_one("#settings-top_p", Input).value == "0.9"
        assert dialog.source_of("top_p") == "preset precise"
        assert dialog.source_of("top_k") == "Gemma 3's recommended"  # not named by the preset: as it was
        dialog.query_one("#dialog-yes").press()
        await settle(pilot)
        sampling = screen.controller.chat_settings().sampling
        assert (sampling.temperature, sampling.top_p, sampling.top_k) == (0.2, 0.9, 64)


def test_the_settings_dialog_with_a_preset(snap_compare, gemma_app):
    app = gemma_app

    async def preset_chosen(pilot):
        await ready(pilot)
        pilot.app.clear_notifications()
        dialog = await open_settings(pilot)
        await choose_preset(pilot, dialog, "precise")
        dialog.query_one("TextArea").cursor_blink = False
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=preset_chosen)
