"""What went wrong before the app started is shown once it has: config, database."""

from __future__ import annotations

from tests.tui.helpers import wait_for


async def test_config_problems_and_a_restored_database_are_shown(fake_model):
    from sessions.api.chat import SessionController
    from sessions.config import Config
    from sessions.sampling import SamplingSettings
    from sessions.store import SessionStore
    from tests.tui.fake_engine import FakeEngineFactory
    from tui.app import LlamaChatApp
    from tui.startup import StartupRequest

    store = SessionStore.open()
    try:
        controller = SessionController(store, engine_factory=FakeEngineFactory(),
                                       sampling=SamplingSettings(temperature=0.0))
        notices = ["config.toml: line 3: n_ctx must be a whole number; using 8192",
                   "the session database was damaged and was restored from its backup"]
        app = LlamaChatApp(controller, config=Config(), startup=StartupRequest(model_path=fake_model),
                           notices=notices)
        async with app.run_test(size=(100, 30)) as pilot:
            shown = lambda: [n.message for n in app._notifications]  # noqa: E731
            await wait_for(pilot, lambda: all(text in shown() for text in notices), "the notices")
    finally:
        store.close()
