"""The ``llamachat`` console entry point: the command line first, the app when asked.

``sessions.cli`` parses the flags and runs subcommands without importing Textual; when
no subcommand is given it calls ``_run_app`` here, which builds the store, the
checkpoint store and the controller with the real llama.cpp engine, and runs the app.
Everything opened here is closed here, after the app has stopped.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext

from sessions.config import Config


def main(argv: list[str] | None = None) -> int:
    from sessions import cli

    return cli.main(argv, run_app=_run_app)


def _run_app(args: argparse.Namespace, config: Config) -> int:
    from sessions.controller import EngineSettings, SessionController
    from sessions.engine.factory import llama_engine_factory, open_checkpoints
    from sessions.events import NoticeRaised
    from sessions.store import SessionStore
    from tui.app import LlamaChatApp
    from tui.startup import StartupRequest

    store = SessionStore.open()
    app: LlamaChatApp | None = None

    def problem(text: str) -> None:
        if app is not None:
            app.forwarder(NoticeRaised(text, "warning"))

    checkpoints = open_checkpoints(config, problem)
    controller = SessionController(store, engine_factory=llama_engine_factory(checkpoints, on_problem=problem),
                                   settings=EngineSettings.from_config(config), sampling=config.effective_sampling())
    try:
        notices = [f"config.toml: {problem}" for problem in getattr(args, "config_problems", [])]
        if getattr(store, "recovery_notice", None):
            notices.append(store.recovery_notice)
        app = LlamaChatApp(controller, config=config, startup=StartupRequest.from_args(args), notices=notices)
        app.run()
        return app.return_code or 0
    finally:
        controller.cancel()
        with app.engine_lock if app is not None else nullcontext():
            if controller.engine is not None:
                controller.engine.close()
        if checkpoints is not None:
            checkpoints.close()
        store.close()
