"""The ``llamachat`` console entry point: the command line first, the app when asked.

``sessions.cli`` parses the flags and runs subcommands without importing Textual; when
no subcommand is given it calls ``_run_app`` here, which builds the store, the
checkpoint store and the controller with the real llama.cpp engine, and runs the app.
Everything opened here is closed here, after the app has stopped.
"""

from __future__ import annotations

import argparse
import os
from contextlib import nullcontext
from pathlib import Path
from typing import Callable

from sessions.config import Config

MIB = 1024 * 1024


def main(argv: list[str] | None = None) -> int:
    from sessions import cli

    return cli.main(argv, run_app=_run_app)


def engine_factory(checkpoints) -> Callable:
    """The controller's factory: a ``LlamaChatEngine`` sharing one checkpoint store."""

    def make(path: Path, settings, on_progress: Callable[[float], None]):
        from sessions.engine.chat_engine import LlamaChatEngine
        from sessions.engine.context import ContextParams

        params = ContextParams(n_ctx=settings.n_ctx, n_batch=settings.n_batch,
                               n_threads=settings.threads or default_threads())
        return LlamaChatEngine(path, params, n_gpu_layers=settings.n_gpu_layers, checkpoints=checkpoints,
                               interval=settings.checkpoint_interval, on_progress=on_progress)

    return make


def default_threads(cpus: int | None = None) -> int:
    """Generation threads when the config does not say: every core but one, at most 8.

    llama.cpp's threads wait for each other at every step of a token; when one of them
    loses its core to the UI thread, all of them wait for it, and a busy screen can
    slow a reply a hundredfold. Leaving a core to the UI avoids that.
    """
    cpus = cpus if cpus is not None else (os.cpu_count() or 1)
    return max(1, min(8, cpus - 1))


def engine_settings(config: Config):
    from sessions.controller import EngineSettings

    return EngineSettings(n_ctx=config.n_ctx, n_batch=config.n_batch, n_gpu_layers=config.n_gpu_layers,
                          threads=config.threads, checkpoint_interval=config.checkpoints.interval)


def checkpoint_store(config: Config, on_problem: Callable[[str], None]):
    """The RAM + disk checkpoint store the config asks for (None when turned off)."""
    if not config.checkpoints.enabled:
        return None
    from sessions.checkpoints import CheckpointStore

    return CheckpointStore(ram_bytes=config.checkpoints.ram_mb * MIB, disk_bytes=config.checkpoints.disk_mb * MIB,
                           on_problem=on_problem)


def _run_app(args: argparse.Namespace, config: Config) -> int:
    from sessions.controller import SessionController
    from sessions.events import NoticeRaised
    from sessions.store import SessionStore
    from tui.app import LlamaChatApp
    from tui.startup import StartupRequest

    store = SessionStore.open()
    app: LlamaChatApp | None = None

    def problem(text: str) -> None:
        if app is not None:
            app.forwarder(NoticeRaised(text, "warning"))

    checkpoints = checkpoint_store(config, problem)
    controller = SessionController(store, engine_factory=engine_factory(checkpoints),
                                   settings=engine_settings(config), sampling=config.sampling)
    try:
        app = LlamaChatApp(controller, config=config, startup=StartupRequest.from_args(args))
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
