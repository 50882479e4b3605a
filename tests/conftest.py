"""Shared fixtures: every test runs with private config, data and cache directories.

Made models are expensive to rebuild, so they live in one cache shared by the whole run
(``LLAMACHAT_TEST_MODEL_CACHE`` or a per-user temp folder), keyed by their parameters.
The parallel workers (pytest-xdist) share it too: a model is written to a temp file and
renamed into place (``sessions.durable``), so two workers making the same model at once
each end up with the whole file, and every later request finds it made.
"""

from __future__ import annotations

import compileall
import os
import sys
import tempfile
from pathlib import Path

import pytest

pytest_plugins = ["tests.cli_support", "tests.fs_support", "tests.gguf_support", "tests.hub_server"]
"""Fixtures shared by several test files (``store``, ``chat``, ``home``, ``small_disk``)."""

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("LLAMACHAT_SHARED", REPO.parent / "shared"))


MODEL_CACHE = os.environ.get(
    "LLAMACHAT_TEST_MODEL_CACHE", str(Path(tempfile.gettempdir()) / f"llamachat-test-models-{os.getuid()}")
)


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto``: one worker more than there are cores. A worker is idle part of the time
    (an app test waiting for its event loop, a test waiting for a process it started), and
    one more worker fills those waits. Two workers per core filled them better, but that
    much load brought out timing flakes (docs/development.md has the figures)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores + 1


def pytest_configure(config) -> None:
    _quicker_idle_checks()
    _keep_bytecode(config)


def _quicker_idle_checks() -> None:
    """The pilot checks that an app has gone idle in steps of 20 ms, twice for every key it
    presses and once for every pause: a typed sentence is a second of waiting, and the app
    tests spent more time in those steps than working. The tests wait for conditions, not
    for the pilot's pauses, so 5 ms steps (idle meaning under 5% of a step's CPU, as in
    Textual) lose nothing. Textual keeps these in a private module; if that changes, the
    steps stay as they were."""
    try:
        from textual import _wait
    except ImportError:
        return
    if hasattr(_wait, "SLEEP_GRANULARITY") and hasattr(_wait, "SLEEP_IDLE"):
        _wait.SLEEP_GRANULARITY = 0.005
        _wait.SLEEP_IDLE = _wait.SLEEP_GRANULARITY / 20


def _keep_bytecode(config) -> None:
    """Keep the bytecode of the project's files, even where ``PYTHONDONTWRITEBYTECODE`` is
    set: every process the tests start (an ``ask``, a trial's child, a benchmark's new
    process: hundreds in a run) would compile the project's 200-odd modules from source
    again, about 0.2 s of CPU each, and every worker would rewrite each test module's
    asserts again (3 s of its collection). The ``__pycache__`` folders are ignored by git."""
    if not sys.dont_write_bytecode:
        return
    sys.dont_write_bytecode = False  # this process: pytest keeps the test modules it rewrites
    if not hasattr(config, "workerinput"):  # the controlling process, before any worker starts
        for package in ("sessions", "tui", "tests"):
            compileall.compile_dir(REPO / package, quiet=2)


@pytest.fixture(scope="session", autouse=True)
def session_dirs(tmp_path_factory):
    """Private folders and the shared model cache for session-scoped fixtures too: they run
    before any per-test fixture could point llamachat away from the user's own folders."""
    root = tmp_path_factory.mktemp("session")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LLAMACHAT_CONFIG", str(root / "config" / "config.toml"))
        patch.setenv("LLAMACHAT_DATA_DIR", str(root / "data"))
        patch.setenv("LLAMACHAT_CACHE_DIR", str(root / "cache"))
        patch.setenv("LLAMACHAT_MODEL_CACHE", MODEL_CACHE)
        yield root


@pytest.fixture(autouse=True)
def private_dirs(tmp_path, monkeypatch):
    """Point every llamachat location at a temporary folder for this test."""
    monkeypatch.setenv("LLAMACHAT_CONFIG", str(tmp_path / "config" / "config.toml"))
    monkeypatch.setenv("LLAMACHAT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("LLAMACHAT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("LLAMACHAT_MODEL_CACHE", MODEL_CACHE)
    return tmp_path


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not SHARED.is_dir():
        pytest.fail(f"shared/ folder not found at {SHARED} (set LLAMACHAT_SHARED)")
    return SHARED
