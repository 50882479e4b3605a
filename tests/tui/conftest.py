"""Fixtures for the app tests: a fake model file, a fake engine, and an app factory.

Every app made here runs on the private directories set up by ``tests/conftest.py``, so
a second app made in the same test sees the first one's sessions (that is how reopening
is tested), and nothing touches the user's real data.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sessions.api.chat import SessionController
from sessions.config import Config
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from tests.tui.fake_engine import FakeEngineFactory, FakeScript
from tui.app import LlamaChatApp
from tui.startup import StartupRequest


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """Message times drawn in UTC, so pictures and texts are the same in every time zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def fake_model(tmp_path) -> Path:
    """A file that stands for a model (the fake engine never reads it)."""
    path = tmp_path / "models" / "fake-model.gguf"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"GGUF fake model")
    return path


@pytest.fixture
def script() -> FakeScript:
    return FakeScript()


@pytest.fixture
def make_app(fake_model, script):
    """``make_app(startup=..., config=...)``: an app over a fresh controller and store."""
    stores: list[SessionStore] = []

    def make(*, startup: StartupRequest | None = None, config: Config | None = None) -> LlamaChatApp:
        store = SessionStore.open()
        stores.append(store)
        controller = SessionController(store, engine_factory=FakeEngineFactory(script),
                                       sampling=SamplingSettings(temperature=0.0))
        return LlamaChatApp(controller, config=config or Config(),
                            startup=startup if startup is not None else StartupRequest(model_path=fake_model))

    yield make
    for store in stores:
        store.close()
