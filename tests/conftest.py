"""Shared fixtures: every test runs with private config, data and cache directories.

Made models are expensive to rebuild, so they live in one cache shared by the whole run
(``LLAMACHAT_TEST_MODEL_CACHE`` or a per-user temp folder), keyed by their parameters.
The parallel workers (pytest-xdist) share it too: a model is written to a temp file and
renamed into place (``sessions.durable``), so two workers making the same model at once
each end up with the whole file, and every later request finds it made.
"""

from __future__ import annotations

import compileall
import gc
import os
import sys
import tempfile
from contextlib import asynccontextmanager
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
    _parse_stylesheets_once()
    _draw_what_is_read()
    _keep_bytecode(config)
    # The cycle collector's full passes ten times rarer, as in the app's own process. An app
    # test leaves its Textual app and widgets in reference cycles, which only a full pass
    # frees, and enough of them that with Python's thresholds a full pass came every test
    # or two, each walking every live object of the worker: a large part of the app tests'
    # CPU (docs/development.md has the figures). Young objects are collected as before.
    from tui.app import collect_cycles_less_often

    collect_cycles_less_often()


def pytest_collection_finish(session) -> None:
    """What is alive once the tests are collected (modules, classes, the test items) lives
    for the whole run: frozen, no full pass walks it again."""
    gc.collect()
    gc.freeze()


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


def _parse_stylesheets_once() -> None:
    """Parse each stylesheet once per test process, not once per app: a user's process
    starts one app, a test worker some hundreds, and parsing the same CSS again was a good
    part of every app test's start. Textual keeps its parse cache per stylesheet, keyed on the
    CSS and where it came from, and empties it when the variables change; here the cache
    is the process's, with the variables in the key, so what an app gets is what its own
    parse would give. The parsed rules are only read after parsing (Textual reuses them
    across its own reparses the same way). If Textual's private method changes, every
    app parses its own CSS as before."""
    try:
        from textual.css.stylesheet import Stylesheet
    except ImportError:
        return
    parse = getattr(Stylesheet, "_parse_rules", None)
    if parse is None or getattr(parse, "shared_by_the_process", False):
        return
    parsed: dict[tuple, list] = {}
    variable_sets: dict[tuple, int] = {}  # each set of variables seen, numbered

    def parse_rules(self, css, read_from, is_default_rules=False, tie_breaker=0, scope=""):
        # Textual replaces a stylesheet's variables (``set_variables``), never changes them
        # in place, so their number is worked out again only when the dict is another.
        seen = getattr(self, "_variables_numbered", None)
        if seen is None or seen[0] is not self._variables:
            number = variable_sets.setdefault(tuple(sorted(self._variables.items())), len(variable_sets))
            seen = self._variables_numbered = (self._variables, number)
        key = (css, read_from, is_default_rules, tie_breaker, scope, seen[1])
        rules = parsed.get(key)
        if rules is None:
            rules = parsed[key] = parse(self, css, read_from, is_default_rules, tie_breaker, scope)
        return rules

    parse_rules.shared_by_the_process = True  # type: ignore[attr-defined]
    Stylesheet._parse_rules = parse_rules


def _draw_what_is_read() -> None:
    """An app under test (headless) draws a frame when a test reads the screen, and its
    last frame when the test ends, not every frame its updates would send a terminal.

    Textual renders every update of the screen, and a headless app throws the result away:
    in the app tests those renders were about a sixth of the CPU (docs/development.md).
    What the tests read is drawn as before, on demand: ``helpers.screen_text`` and the
    snapshots render the screen themselves. The layout is still worked out at every update
    (the widgets' sizes and places are what much of the UI's behaviour reads), and the
    last frame of every app test is drawn when its ``run_test`` ends, so a widget that
    cannot draw the state a test leaves fails that test. The real terminals of the pty
    tests draw every frame. If Textual's private method changes, every frame is drawn."""
    try:
        from textual.app import App
        from textual.screen import Screen
    except ImportError:
        return
    refresh = getattr(Screen, "_compositor_refresh", None)
    if refresh is None or getattr(refresh, "draws_what_is_read", False):
        return

    def compositor_refresh(self) -> None:
        app = self.app
        if app.is_headless and not app.is_inline and self is app.screen:
            self._compositor._dirty_regions.clear()  # what render_update would have drawn
            self._dirty_widgets.clear()
            app._update_mouse_over(self)
            return
        refresh(self)

    run_test = App.run_test

    @asynccontextmanager
    async def run_test_drawing_the_last_frame(self, *args, **kwargs):
        async with run_test(self, *args, **kwargs) as pilot:
            yield pilot
            if self.is_running and not self._exit:
                self.screen._compositor.render_full_update()

    compositor_refresh.draws_what_is_read = True  # type: ignore[attr-defined]
    Screen._compositor_refresh = compositor_refresh
    App.run_test = run_test_drawing_the_last_frame


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
