"""A switch that decodes shows its progress: a bar with the tokens done of the total, the
time left and the key that stops it; Esc stops it, and the status bar says what then."""

from __future__ import annotations

import threading

import pytest

from tests.tui.helpers import settle, wait_for
from tests.tui.test_main_snapshots import SIZE, write_chat
from tui.screens.tree_gestures import SWITCH_STOPPED
from tui.startup import StartupRequest


@pytest.fixture
def held(script):
    """Every prompt read stops half way until the test lets it go (or a stop ends it)."""
    script.progress_gate = threading.Event()
    yield script.progress_gate
    script.progress_gate.set()


async def switching(pilot):
    screen = pilot.app.screen
    await wait_for(pilot, lambda: screen.progress.active and "switching:" in screen.progress.label_text,
                   "the switch's progress")
    return screen


async def test_a_switch_shows_tokens_done_of_total_and_esc_stops_it(make_app, fake_model, held):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model), model_path=fake_model))
    async with app.run_test(size=SIZE) as pilot:
        screen = await switching(pilot)  # the reopened chat's branch is saved nowhere: it is decoded
        label = screen.progress.label_text
        assert label.startswith("switching: ") and "tokens" in label and "left" in label
        assert label.endswith("· esc stops")
        done, of = label.removeprefix("switching: ").split(" tokens")[0].split("/")
        assert int(done.replace(",", "")) * 2 in (int(of.replace(",", "")), int(of.replace(",", "")) - 1)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not screen.jobs.running("warm"), "the switch stopped")
        await settle(pilot)
        assert not screen.progress.active
        assert screen.status.text_of("note") == SWITCH_STOPPED
        assert not [n for n in app._notifications if n.severity == "error"]


def test_the_switch_progress(snap_compare, make_app, fake_model, held):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model), model_path=fake_model))

    async def half_way(pilot):
        screen = await switching(pilot)
        pilot.app.clear_notifications()
        screen.chat_input.cursor_blink = False

    assert snap_compare(app, terminal_size=SIZE, run_before=half_way)
