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


def pytest_configure(config) -> None:
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
