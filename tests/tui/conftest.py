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


STORE_NOW = 60.0
"""What the store takes for now under ``store_clock``: a minute after the fixed times the
snapshot chats are written at, so a message written in the app is dated as they are."""


@pytest.fixture
def store_clock(monkeypatch) -> float:
    """Messages written in the app, and the time their chat last changed, stamped at
    ``STORE_NOW`` instead of when the test runs (a snapshot would show the time of day).
    Only the store's clock is fixed: Textual's timers and the notifications' timeouts keep
    the real one."""
    from types import SimpleNamespace

    from sessions.store import lookups

    monkeypatch.setattr(lookups, "time", SimpleNamespace(time=lambda: STORE_NOW))
    return STORE_NOW


@pytest.fixture
def every_streamed_figure_drawn(monkeypatch) -> None:
    """The status bar draws the context meter of a reply being written at every piece, not
    a few times a second: a picture taken while a reply is held then shows the meter of the
    last piece, not that of whichever piece was due when (it depends on the machine's load)."""
    from tui.widgets import status_bar

    monkeypatch.setattr(status_bar, "STREAMING_EVERY", 0.0)


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
    """``make_app(startup=..., config=...)``: an app over a fresh controller and store.

    ``notices``: what the app is told at start, as ``llamachat`` passes the config's problems
    and a recovered database's notice; ``undo_seconds``: the controller's, as ``undo_minutes``
    sets it (0: deletions cannot be undone)."""
    stores: list[SessionStore] = []

    def make(*, startup: StartupRequest | None = None, config: Config | None = None,
             notices: list[str] | None = None, undo_seconds: float | None = None) -> LlamaChatApp:
        store = SessionStore.open()
        stores.append(store)
        controller = SessionController(store, engine_factory=FakeEngineFactory(script),
                                       sampling=SamplingSettings(temperature=0.0), undo_seconds=undo_seconds)
        return LlamaChatApp(controller, config=config or Config(), notices=notices,
                            startup=startup if startup is not None else StartupRequest(model_path=fake_model))

    yield make
    for store in stores:
        store.close()
