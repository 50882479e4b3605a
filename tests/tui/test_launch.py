"""The console entry point (``tui.entry``): flags through ``sessions.cli``, then the app with the real engine."""

from __future__ import annotations

import pytest

import sessions.cli
from sessions.api.chat import EngineSettings
from sessions.config import CheckpointConfig, Config
from sessions.store import StoreError
from tui import entry as launch
from tui.app import LlamaChatApp
from tui.startup import StartupRequest


def test_a_subcommands_status_is_the_entry_points_and_no_app_starts(monkeypatch, capsys):
    started = []
    monkeypatch.setattr(launch, "run_app", started.append)
    assert launch.main(["sessions"]) == 0
    assert launch.main(["--no-such-flag"]) == 1
    assert started == []


def test_without_a_subcommand_the_entry_point_starts_the_app_with_what_the_command_line_parsed(monkeypatch):
    started = []

    def run_app(options):
        started.append(options)
        return 7

    monkeypatch.setattr(launch, "run_app", run_app)
    assert launch.main(["--demo", "-c", "1024"]) == 7
    [options] = started
    assert isinstance(options, sessions.cli.LaunchOptions)
    assert options.demo and options.config.n_ctx == 1024


def test_a_failure_of_the_apps_start_is_one_line_and_status_1(monkeypatch, capsys):
    def run_app(options):
        raise StoreError("the chats database is locked by another program")

    monkeypatch.setattr(launch, "run_app", run_app)
    assert launch.main([]) == 1
    assert capsys.readouterr().err == "llamachat: error: the chats database is locked by another program\n"


def test_a_signal_during_the_apps_start_is_its_status(monkeypatch, capsys):
    def run_app(options):
        raise KeyboardInterrupt

    monkeypatch.setattr(launch, "run_app", run_app)
    assert launch.main([]) == 130
    assert "stopped by SIGINT before the app's start finished" in capsys.readouterr().err


def test_the_app_gets_the_flags_and_everything_is_closed_after_it(monkeypatch):
    ran = {}

    def run(self):
        controller = self.controller
        ran.update(startup=self.startup, settings=controller.settings, config=self.config,
                   controller=controller, sessions=controller.library.list_sessions())

    monkeypatch.setattr(LlamaChatApp, "run", run)
    assert launch.main(["--demo", "-c", "2048", "-t", "3"]) == 0
    assert ran["startup"] == StartupRequest(demo=True)
    assert (ran["settings"].n_ctx, ran["settings"].threads) == (2048, 3)
    assert ran["config"].n_ctx == 2048
    assert ran["sessions"] == []  # nothing is created before the app runs
    with pytest.raises(StoreError, match="closed"):  # the store is closed once the app has ended
        ran["controller"].library.list_sessions()


def test_the_runtime_opens_checkpoints_only_when_enabled_and_closes_all_in_order(fake_model, monkeypatch):
    """The model first, then the checkpoints (their writer finishes what the model left),
    then the database, as ``sessions.api.runtime`` promises."""
    from sessions.api.runtime import open_runtime
    from sessions.checkpoints import CheckpointStore
    from sessions.store import SessionStore
    from tests.tui.fake_engine import FakeEngine, FakeEngineFactory

    with open_runtime(Config(checkpoints=CheckpointConfig(enabled=False)), engine_factory=FakeEngineFactory()) as bare:
        assert bare.checkpoints is None  # --no-checkpoints: the engine runs without a checkpoint store
    closed = []
    for owner, name in ((FakeEngine, "model"), (CheckpointStore, "checkpoints"), (SessionStore, "store")):
        def recording(self, original=owner.close, name=name):
            closed.append(name)
            return original(self)

        monkeypatch.setattr(owner, "close", recording)
    with open_runtime(Config(checkpoints=CheckpointConfig(ram_mb=8, max_disk=16 << 20)),
                      engine_factory=FakeEngineFactory()) as runtime:
        runtime.controller.load_model(fake_model)
        engine = runtime.controller.engine
        assert isinstance(runtime.checkpoints, CheckpointStore)
        assert closed == []
    assert closed == ["model", "checkpoints", "store"]
    assert engine.closed and runtime.controller.engine is None
    with pytest.raises(StoreError, match="closed"):
        runtime.store.list_sessions()


def test_checkpoint_problems_reach_the_listener_as_notices(monkeypatch):
    from sessions.api.runtime import open_runtime
    from sessions.engine import factory
    from sessions.events import NoticeRaised
    from tests.tui.fake_engine import FakeEngineFactory

    reporters = []
    monkeypatch.setattr(factory, "open_checkpoints", lambda config, on_problem: reporters.append(on_problem))
    heard, heard_later = [], []
    with open_runtime(Config(), listener=heard.append, engine_factory=FakeEngineFactory()) as runtime:
        [report] = reporters  # what the checkpoint store calls, from its writer thread too
        report("a checkpoint file was damaged and was deleted")
        runtime.controller.listener = heard_later.append  # as the app does: notices follow the listener
        report("another one")
    assert heard == [NoticeRaised("a checkpoint file was damaged and was deleted", "warning")]
    assert heard_later == [NoticeRaised("another one", "warning")]


def test_checkpoints_follow_the_config():
    """Off means no store; on, its RAM and disk budgets are the config's, in MiB: a
    segment of half a MiB stays in RAM, one of 1.25 MiB only fits the 2 MiB disk, and
    one of 2.5 MiB fits neither."""
    from sessions.checkpoints import Segment, StateCompat, prefix_hash
    from sessions.engine.factory import open_checkpoints

    off = Config(checkpoints=CheckpointConfig(enabled=False))
    assert open_checkpoints(off, print) is None
    problems: list[str] = []
    store = open_checkpoints(Config(checkpoints=CheckpointConfig(ram_mb=1, max_disk=2 << 20)), problems.append)
    assert store is not None
    compat = StateCompat("sha256:" + "55" * 32, "type_k=f16;type_v=f16")
    mib = 1 << 20

    def segment(end: int, size: int) -> Segment:
        return Segment(compat, prefix_hash(list(range(end))), None, 0, end, bytes(size), None)

    small, middle, large = segment(10, mib // 2), segment(20, mib + mib // 4), segment(30, 2 * mib + mib // 2)
    try:
        for each in (middle, small, large):
            store.put(each)
        assert store.flush(30)
        assert [store.where(compat, each.prefix) for each in (small, middle, large)] == ["ram", "disk", None]
    finally:
        store.close()
    assert len(problems) == 1 and "is larger than the disk budget" in problems[0]


def test_engine_settings_come_from_the_config():
    config = Config(n_ctx=4096, n_batch=256, n_gpu_layers=-1, threads=2,
                    checkpoints=CheckpointConfig(interval=512))
    settings = EngineSettings.from_config(config)
    assert (settings.n_ctx, settings.n_batch, settings.n_gpu_layers, settings.threads,
            settings.checkpoint_interval) == (4096, 256, -1, 2, 512)


def test_generation_leaves_a_core_to_the_screen():
    from sessions.llama.context import default_threads

    assert default_threads(1) == 1
    assert default_threads(4) == 3
    assert default_threads(64) == 8
