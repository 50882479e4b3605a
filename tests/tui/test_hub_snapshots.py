"""Snapshots of the Hub's download screen: a download half way, with its bar, bytes and
rate, and a search that found nothing. (Its search results are
``test_hub_download_screen.test_download_screen_with_search_results``.)

The Hub is the stand-in on a loopback port (``tests.hub_server``), at the size of that
screen's other snapshot.
"""

from __future__ import annotations

import threading
from dataclasses import replace

import pytest
from textual.widgets import Input, Static

from sessions.api.chat import ModelCatalogue
from sessions.hub import transfer
from sessions.hub.progress import DownloadProgress, ProgressCallback
from tests.tui.helpers import wait_for
from tests.tui.test_pickers import HostApp
from tui.screens import hub_download
from tui.screens.hub_download import HubDownloadScreen

SIZE = (100, 24)
RATE = 4_200_000.0
"""The rate every step says: the one figure of a step that depends on the machine."""
FILE_SIZE = 4_920_000
"""The file fetched (bytes of no model: the screen hands the file over, it loads nothing)."""


@pytest.fixture
def served(fake_hub, monkeypatch):
    """Two repositories, the most downloaded first; files of fixed sizes. A held download
    is not resumed by the client's read timeout meanwhile (10 s by default)."""
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "120")
    fake_hub.add("org/tiny-GGUF", {"tiny-Q4_K_M.gguf": b"GGUF" + bytes(FILE_SIZE - 4)}, downloads=5)
    fake_hub.add("org/tiny-chat-GGUF", {"chat-Q4_K_M.gguf": b"GGUF" + bytes(1000)}, downloads=50)
    return fake_hub


class SteadyRate(ModelCatalogue):
    """The catalogue, its downloads reported at ``RATE`` (the bytes are the download's own)."""

    def download(self, name: str, progress: ProgressCallback | None = None):
        def steady(step: DownloadProgress) -> None:
            if progress is not None:
                progress(replace(step, rate=RATE))

        return super().download(name, steady)


async def search(pilot, words: str) -> HubDownloadScreen:
    screen = HubDownloadScreen(SteadyRate())
    pilot.app.open(screen)
    await wait_for(pilot, lambda: bool(screen.query("#hub-query")), "the download screen")
    screen.query_one("#hub-query", Input).cursor_blink = False
    await pilot.press(*words, "enter")
    return screen


def test_a_download_half_way(snap_compare, served, monkeypatch):
    half = FILE_SIZE // 2
    release = threading.Event()
    served.hold_at["tiny-Q4_K_M.gguf"] = (half, release)  # the body stops there until the app closes
    monkeypatch.setattr(transfer, "REPORT_EVERY", 0.0)  # every chunk reported: the last one is at the hold
    monkeypatch.setattr(hub_download, "QUIET_SECONDS", 1e9)  # the picture is of the figures, however slow
    app = HostApp()
    leave = app.exit

    def exit_and_release(*args, **kwargs) -> None:
        release.set()  # the picture is taken: the download ends, and the app with it
        leave(*args, **kwargs)

    app.exit = exit_and_release

    async def half_way(pilot):
        screen = await search(pilot, "tiny")
        await wait_for(pilot, lambda: len(screen.found) == 2, "the search results")
        await pilot.press("down", "enter")  # the second result
        step = screen.query_one("#hub-step", Static)
        done = f"{half / 1e6:.1f} MB of"
        await wait_for(pilot, lambda: done in str(step.render()), "the bytes before the hold")

    assert snap_compare(app, terminal_size=SIZE, run_before=half_way)


def test_a_search_that_found_nothing(snap_compare, served):
    app = HostApp()

    async def nothing(pilot):
        screen = await search(pilot, "nothing")
        status = screen.query_one("#picker-status", Static)
        await wait_for(pilot, lambda: "No GGUF model found" in str(status.render()), "the empty search")

    assert snap_compare(app, terminal_size=SIZE, run_before=nothing)
