"""The console entry point: flags through ``sessions.cli``, then the app with the real engine."""

from __future__ import annotations

import pytest

import sessions.cli
from sessions.config import CheckpointConfig, Config
from sessions.controller import EngineSettings
from sessions.store import StoreError
from tui import launch
from tui.app import LlamaChatApp
from tui.startup import StartupRequest


def test_main_hands_the_app_runner_to_the_command_line(monkeypatch):
    seen = {}

    def cli_main(argv, *, run_app):
        seen.update(argv=argv, run_app=run_app)
        return 7

    monkeypatch.setattr(sessions.cli, "main", cli_main)
    assert launch.main(["--demo"]) == 7
    assert seen == {"argv": ["--demo"], "run_app": launch._run_app}


def test_the_app_gets_the_flags_and_everything_is_closed_after_it(monkeypatch):
    ran = {}

    def run(self):
        ran.update(startup=self.startup, settings=self.controller.settings, config=self.config,
                   store=self.controller.store, sessions=self.controller.store.list_sessions())

    monkeypatch.setattr(LlamaChatApp, "run", run)
    assert launch.main(["--demo", "-c", "2048", "-t", "3"]) == 0
    assert ran["startup"] == StartupRequest(demo=True)
    assert (ran["settings"].n_ctx, ran["settings"].threads) == (2048, 3)
    assert ran["config"].n_ctx == 2048
    assert ran["sessions"] == []  # nothing is created before the app runs
    with pytest.raises(StoreError, match="closed"):  # the store is closed once the app has ended
        ran["store"].list_sessions()


def test_checkpoints_follow_the_config():
    from sessions.engine.factory import open_checkpoints

    off = Config(checkpoints=CheckpointConfig(enabled=False))
    assert open_checkpoints(off, print) is None
    store = open_checkpoints(Config(checkpoints=CheckpointConfig(ram_mb=8, disk_mb=16)), print)
    try:
        assert store is not None
    finally:
        store.close()


def test_engine_settings_come_from_the_config():
    config = Config(n_ctx=4096, n_batch=256, n_gpu_layers=-1, threads=2,
                    checkpoints=CheckpointConfig(interval=512))
    settings = EngineSettings.from_config(config)
    assert (settings.n_ctx, settings.n_batch, settings.n_gpu_layers, settings.threads,
            settings.checkpoint_interval) == (4096, 256, -1, 2, 512)


def test_generation_leaves_a_core_to_the_screen():
    from sessions.engine.context import default_threads

    assert default_threads(1) == 1
    assert default_threads(4) == 3
    assert default_threads(64) == 8
