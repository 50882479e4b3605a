"""The model picker's download row: search the Hub, pick, watch the bar, load what came.

The Hub is the stand-in on a loopback port (``tests.hub_server``); the download runs in
the screen's thread worker, as it would from huggingface.co.
"""

from __future__ import annotations

import threading

import pytest
from textual.widgets import DataTable, Input, ProgressBar, Static

from sessions.api.chat import ModelCatalogue
from sessions.config import Config
from sessions.hub import transfer
from sessions.synth import make_model
from tests.tui.helpers import wait_for
from tests.tui.test_pickers import HostApp, settle
from tui.screens import hub_download
from tui.screens.hub_download import HubDownloadScreen
from tui.screens.model_picker import ModelPicker

REPO = "org/tiny-GGUF"


@pytest.fixture
def tiny():
    return make_model("llama", "tiny")


@pytest.fixture
def served(fake_hub, tiny, monkeypatch):
    """Two repositories; a paused download has written (and reported) the bytes it got.
    A held download is not read again meanwhile: the client's read timeout (10 s by
    default) would otherwise resume it, whole, from a server whose hold is spent. Every chunk
    is reported: the half before a hold comes in one burst, and a report only every 0.1 s
    would leave its last bytes untold until the hold ends."""
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "120")
    monkeypatch.setattr(transfer, "REPORT_EVERY", 0.0)
    fake_hub.add(REPO, {"tiny-Q8_0.gguf": make_model("gemma3", "tiny"), "tiny-Q4_K_M.gguf": tiny}, downloads=5)
    fake_hub.add("org/tiny-chat-GGUF", {"chat-Q4_K_M.gguf": b"x"}, downloads=50)
    return fake_hub


def hold_half_way(served, tiny) -> threading.Event:
    """The Q4_K_M file's body stops half way until the event returned is set."""
    release = threading.Event()
    served.hold_at["tiny-Q4_K_M.gguf"] = (tiny.stat().st_size // 2, release)
    return release


def status_text(screen) -> str:
    return str(screen.query_one("#picker-status", Static).render())


async def open_download_row(pilot, app: HostApp) -> HubDownloadScreen:
    picker = ModelPicker(ModelCatalogue(), Config())
    app.open(picker)
    await settle(pilot)
    await pilot.press("down", "enter")  # the row under the demo model
    await wait_for(pilot, lambda: isinstance(app.screen, HubDownloadScreen), "the download screen")
    return app.screen  # type: ignore[return-value]


async def fetch_typed(pilot, app: HostApp, name: str = REPO) -> HubDownloadScreen:
    """The download screen, opened from the picker, with ``name`` typed and Enter pressed."""
    screen = await open_download_row(pilot, app)
    screen.query_one("#hub-query", Input).value = name
    await pilot.press("enter")
    return screen


async def test_search_then_enter_downloads_with_a_bar_of_bytes_and_rate(served, tiny):
    release = hold_half_way(served, tiny)
    app = HostApp()
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_download_row(pilot, app)
        await pilot.press(*"tiny", "enter")
        await wait_for(pilot, lambda: len(screen.found) == 2, "the search results")
        table = screen.query_one("#hub-results", DataTable)
        assert [str(table.get_row(str(i))[0]) for i in range(2)] == ["org/tiny-chat-GGUF", REPO]
        await pilot.press("down", "enter")  # the second result
        step = screen.query_one("#hub-step", Static)
        await wait_for(pilot, lambda: "%)" in str(step.render()) and "(0%)" not in str(step.render()),
                       "some bytes to arrive")
        size = f"{tiny.stat().st_size / 1e6:.1f} MB"
        assert f" of {size} (" in str(step.render()) and str(step.render()).endswith("B/s")
        assert app.screen is screen and app.results == []  # held half way: still downloading
        bar = screen.query_one("#hub-progress", ProgressBar)
        assert bar.display and 0 < bar.progress < bar.total == tiny.stat().st_size
        release.set()
        await wait_for(pilot, lambda: len(app.results) == 1, "the picker to close")
    (path,) = app.results
    assert path.name == "tiny-Q4_K_M.gguf" and path.read_bytes() == tiny.read_bytes()


async def test_a_download_that_brings_nothing_says_for_how_long(served, tiny, monkeypatch):
    """The rate drawn is that of the last bytes: a Hub that stops sending must not look busy."""
    monkeypatch.setattr(hub_download, "QUIET_SECONDS", 0.5)
    release = hold_half_way(served, tiny)
    app = HostApp()
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await fetch_typed(pilot, app)
        step = screen.query_one("#hub-step", Static)
        await wait_for(pilot, lambda: "nothing came for" in str(step.render()), "the quiet told")
        text = str(step.render())
        assert text.startswith("tiny-Q4_K_M.gguf: ") and "B/s · nothing came for " in text and text.endswith(" s")
        release.set()
        await wait_for(pilot, lambda: len(app.results) == 1, "the download to end")
    assert app.results[0].name == "tiny-Q4_K_M.gguf"


async def test_a_typed_name_with_a_tag_downloads_that_file(served):
    app = HostApp()
    async with app.run_test(size=(120, 36)) as pilot:
        await fetch_typed(pilot, app, f"{REPO}:q8_0")
        await wait_for(pilot, lambda: len(app.results) == 1, "the download")
    assert app.results[0].name == "tiny-Q8_0.gguf"
    assert [r.path for r in served.requests if r.path == "/api/models"] == []  # no search for a name


async def test_a_missing_repository_says_so_and_the_screen_stays(served):
    app = HostApp()
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await fetch_typed(pilot, app, "org/nothing-here")
        await wait_for(pilot, lambda: screen.downloading is None and "no model named" in status_text(screen),
                       "the refusal")
        assert status_text(screen).startswith("no model named org/nothing-here on ")
        assert screen.query_one("#picker-status", Static).has_class("-error")
        assert app.screen is screen and app.results == []
        screen.query_one("#hub-query", Input).value = "nothing"
        await pilot.press("enter")
        await wait_for(pilot, lambda: "No GGUF model found" in status_text(screen), "the empty search")


async def test_escape_stops_a_download_and_closes_the_screen(served, tiny, tmp_path):
    release = hold_half_way(served, tiny)
    app = HostApp()
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await fetch_typed(pilot, app)
        step = screen.query_one("#hub-step", Static)
        await wait_for(pilot, lambda: "(0%)" not in str(step.render()) and "%" in str(step.render()), "bytes")
        await pilot.press("escape")
        await wait_for(pilot, lambda: "Stopping the download" in status_text(screen), "the stop said")
        release.set()
        await wait_for(pilot, lambda: not isinstance(app.screen, HubDownloadScreen), "the screen to close")
        assert isinstance(app.screen, ModelPicker)
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(app.results) == 1, "the picker to close")
    assert app.results == [None]
    cache = tmp_path / "hf-home" / "hub" / "models--org--tiny-GGUF"
    kept = [path.relative_to(cache) for path in cache.rglob("*") if path.is_file()]
    assert kept == []  # no half file is kept, and no ref to a snapshot that has none


def test_download_screen_with_search_results(snap_compare, served):
    app = HostApp()

    async def search(pilot):
        app.open(HubDownloadScreen(ModelCatalogue()))
        await pilot.pause()
        screen = app.screen
        screen.query_one("#hub-query", Input).cursor_blink = False
        await pilot.press(*"tiny", "enter")
        await wait_for(pilot, lambda: len(screen.found) == 2, "the search results")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(100, 24), run_before=search)
