"""Hostile or broken model files in the app: the user is told why, and the chat stays.

A model whose chat template reaches for Python internals loads with ChatML and a notice;
a file that is not a model, is cut short, or has vanished since the session was saved
becomes a notification in plain words, while the app keeps running and the conversation
stays on screen.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from textual.widgets import Input, Static

from sessions.api.chat import EngineSettings, SessionController
from sessions.config import Config
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from sessions.synth import make_model
from tests.tui.fake_engine import FakeEngineFactory
from tests.tui.helpers import main_screen, ready, send, settle, shown_texts, wait_for
from tui.app import LlamaChatApp
from tui.screens.dialogs import ChoiceScreen
from tui.screens.model_picker import ModelPicker
from tui.startup import StartupRequest

MARKER = Path(tempfile.gettempdir()) / f"llamachat-template-escape-{os.getuid()}"
HOSTILE_TEMPLATE = "{{ cycler.__init__.__globals__.os.popen('touch " + str(MARKER) + "').read() }}"


class RealForOtherFiles(FakeEngineFactory):
    """The fake engine for the fake model, llama.cpp itself for any other file."""

    def __call__(self, path, settings, on_progress):
        if Path(path).name == "fake-model.gguf":
            return super().__call__(path, settings, on_progress)
        from sessions.engine.factory import llama_engine_factory

        return llama_engine_factory(None)(path, settings, on_progress)


def alien_model(folder: Path) -> Path:
    """A well-formed GGUF of an architecture llama.cpp does not know: only loading tells."""
    import gguf
    import numpy as np

    path = folder / "alien.gguf"
    writer = gguf.GGUFWriter(path, "nonsense")
    writer.add_name("alien")
    writer.add_tensor("weight", np.zeros(4, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def messages(app) -> list[str]:
    return [n.message for n in app._notifications]


async def pick_path(pilot, path: Path) -> ModelPicker:
    await pilot.press("f5")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ModelPicker), "the model picker")
    picker = pilot.app.screen
    box = picker.query_one("#model-path", Input)
    box.value = str(path)
    box.focus()
    status = picker.query_one("#picker-status")
    await pilot.press("enter")
    # A chat with a model of its own asks before it changes: Enter presses "Switch".
    await wait_for(pilot, lambda: not isinstance(pilot.app.screen, ModelPicker) or status.has_class("-error"),
                   "the picker closed, or its refusal")
    if isinstance(pilot.app.screen, ChoiceScreen):
        await pilot.press("enter")
    return picker


@pytest.mark.engine
async def test_a_hostile_template_is_refused_with_a_notice_and_the_chat_goes_on():
    MARKER.unlink(missing_ok=True)
    model = make_model("llama", "tiny", chat_template=HOSTILE_TEMPLATE)
    store = SessionStore.open()
    from sessions.engine.factory import llama_engine_factory

    controller = SessionController(store, engine_factory=llama_engine_factory(None),
                                   settings=EngineSettings(n_ctx=512, n_batch=64, threads=1),
                                   sampling=SamplingSettings(temperature=0.0, max_tokens=8))
    app = LlamaChatApp(controller, config=Config(), startup=StartupRequest(model_path=model))
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            screen = await ready(pilot)
            notice = [m for m in messages(app) if "chat template" in m]
            assert len(notice) == 1 and "forbidden" in notice[0] and "ChatML template instead" in notice[0]
            await send(pilot, "Hello there")
            texts = shown_texts(screen)
            assert texts[0] == ("user", "Hello there") and texts[1][0] == "assistant" and texts[1][1]
    finally:
        if controller.engine is not None:
            controller.engine.close()
        store.close()
    assert not MARKER.exists()


async def test_unusable_files_in_the_model_picker_are_explained_and_nothing_changes(make_app, tmp_path):
    truncated = tmp_path / "half.gguf"
    model = make_model("llama", "tiny").read_bytes()
    truncated.write_bytes(model[: len(model) // 2])
    text = tmp_path / "readme.gguf"
    text.write_text("not a model\n")
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        before = shown_texts(screen)
        for path, words in ((truncated, "incomplete file"), (text, "not a GGUF file"),
                            (tmp_path / "gone.gguf", "no such model file")):
            picker = await pick_path(pilot, path)
            status = picker.query_one("#picker-status", Static)
            await wait_for(pilot, lambda w=words, s=status: w in str(s.render()), f"the picker to say {words!r}")
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, ModelPicker), "the picker to close")
        assert screen.jobs.model_ready and shown_texts(screen) == before
        await send(pilot, "still chatting")
        assert shown_texts(screen)[-2] == ("user", "still chatting")


@pytest.mark.engine
async def test_a_model_llama_cpp_cannot_load_is_a_notification_and_the_session_stays(make_app, tmp_path, script):
    alien = alien_model(tmp_path)
    app = make_app()
    app.controller._factory = RealForOtherFiles(script)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        before = shown_texts(screen)
        await pick_path(pilot, alien)
        await wait_for(pilot, lambda: any("alien.gguf" in m for m in messages(app)), "the failure")
        await settle(pilot)
        failure = next(m for m in messages(app) if "alien.gguf" in m)
        assert failure.startswith("Could not load the model") and "unknown model architecture" in failure
        assert app.is_running and shown_texts(screen) == before
        # The model that was loaded before is loaded again: the chat goes on.
        await wait_for(pilot, lambda: screen.status.text_of("model") != "no model", "the previous model back")
        await send(pilot, "still here")
        await wait_for(pilot, lambda: shown_texts(screen)[-1][0] == "assistant", "a reply")
        assert ("user", "still here") in shown_texts(screen)


async def test_a_session_whose_model_vanished_stays_readable(make_app, fake_model):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "remember me")
        before = shown_texts(screen)
    fake_model.unlink()
    again = make_app(startup=StartupRequest())  # reopen the last session
    async with again.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(again.screen, ModelPicker), "the model picker")
        assert any("not on disk any more" in m for m in messages(again))
        await pilot.press("escape")
        screen = main_screen(pilot)
        await wait_for(pilot, lambda: again.screen is screen, "the chat screen")
        assert again.is_running and shown_texts(screen) == before
        assert "F5" in screen.status.text_of("note")


@pytest.mark.engine
async def test_escape_stops_a_model_template_that_runs_long_and_the_model_loads(monkeypatch):
    """The load held at 100% while the template computed; Esc now ends its test render."""
    from sessions.engine.factory import llama_engine_factory
    from sessions.templates import sandbox
    from tests.templates.test_template_deadline import SLOW

    monkeypatch.setattr(sandbox, "CPU_SECONDS", 600.0)  # only Esc can end it now
    model = make_model("llama", "tiny", markers="chatml", chat_template=SLOW)
    store = SessionStore.open()
    controller = SessionController(store, engine_factory=llama_engine_factory(None),
                                   settings=EngineSettings(n_ctx=512, n_batch=64, threads=1),
                                   sampling=SamplingSettings(temperature=0.0, max_tokens=8))
    app = LlamaChatApp(controller, config=Config(), startup=StartupRequest(model_path=model))
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await wait_for(pilot, lambda: bool(sandbox._rendering), "the template's test render")
            await pilot.press("escape")
            screen = await ready(pilot)
            notice = [m for m in messages(app) if "chat template" in m]
            assert len(notice) == 1 and notice[0].startswith(
                "the model's chat template was stopped before it finished rendering a test conversation; "
                "using the ChatML template instead")
            await send(pilot, "Hello there")
            assert shown_texts(screen)[1][0] == "assistant"
    finally:
        if controller.engine is not None:
            controller.engine.close()
        store.close()
