"""Snapshots of a reply's versions and of a reply being written: the second of three
stored versions paged to (``‹ 2/3 ›``), the question asking how many versions to write at
once, a reply half written and one stopped half way, and the refusal of several versions at
temperature 0.
(Several versions being written are ``test_what_you_see_snapshots``'.)

The chats are written straight into the store (fixed texts and times), at the size of
``test_main_snapshots``.
"""

from __future__ import annotations

from sessions.sampling import SamplingSettings
from tests.tui.helpers import reply_text, settle, wait_for
from tests.tui.test_delete_snapshots import toast_shown
from tests.tui.test_main_snapshots import SIZE, quiet
from tests.tui.test_what_you_see_snapshots import write_chat
from tui.screens.dialogs import TextPrompt
from tui.startup import StartupRequest

VERSIONS = ("A haiku is three lines: five, seven and five syllables.",
            "Three lines of five, seven and five syllables, often about a season.",
            "A short poem from Japan.")


def test_the_second_of_three_versions(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, *VERSIONS, question="What is a haiku?")))

    async def page_back(pilot):
        await quiet(pilot)
        screen = pilot.app.screen
        await pilot.press("alt+left")  # the version before the one shown, selected
        await wait_for(pilot, lambda: screen.controller.snapshot().head.text == VERSIONS[1], "the second version")
        await settle(pilot)
        screen.warm_ahead.stop()  # the first version, warmed once the page rests: nothing on screen changes
        pilot.app.clear_notifications()  # what the switch cost (the fake's figures)

    assert snap_compare(app, terminal_size=SIZE, run_before=page_back)


def test_how_many_versions_is_asked(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, VERSIONS[0], question="What is a haiku?")))

    async def ask(pilot):
        await quiet(pilot)
        await pilot.press("alt+r")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TextPrompt), "the count asked for")
        pilot.app.screen.query_one("#prompt-input").cursor_blink = False

    assert snap_compare(app, terminal_size=SIZE, run_before=ask)


def test_several_versions_at_temperature_zero_are_refused(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, VERSIONS[0], question="What is a haiku?")))

    async def refused(pilot):
        await quiet(pilot)
        pilot.app.screen.controller.set_sampling(SamplingSettings(temperature=0.0))
        await pilot.press("alt+r")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TextPrompt), "the count asked for")
        await pilot.press("enter")  # three, as offered
        await toast_shown(pilot, "At temperature 0 every version would be the same reply")

    assert snap_compare(app, terminal_size=SIZE, run_before=refused)


def test_a_reply_being_written(snap_compare, make_app, fake_model, script, every_streamed_figure_drawn):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, VERSIONS[0], question="Write a haiku")))

    async def half_written(pilot):
        await quiet(pilot)
        screen = pilot.app.screen
        script.replies = ["An old silent pond, a frog jumps into the pond, splash! Silence again."]
        script.hold_after = 6  # six words, then held until the app closes
        await pilot.press("ctrl+r")  # a new version (a message sent now would show the time of day)
        await wait_for(pilot, lambda: reply_text(screen).strip() == "An old silent pond, a frog", "six words")
        screen.status.set_speed(None)  # a speed measured on the fake's clock
        pilot.app.clear_notifications()

    assert snap_compare(app, terminal_size=SIZE, run_before=half_written)


def test_a_reply_stopped_half_way(snap_compare, make_app, fake_model, script, store_clock):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, VERSIONS[0], question="Write a haiku")))

    async def stopped(pilot):
        await quiet(pilot)
        screen = pilot.app.screen
        script.replies = ["An old silent pond, a frog jumps into the pond, splash! Silence again."]
        script.hold_after = 6
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: reply_text(screen).strip() == "An old silent pond, a frog", "six words")
        await pilot.press("escape")
        await wait_for(pilot, lambda: screen.controller.snapshot().head.text == "An old silent pond, a frog ",
                       "the words written kept as a version")
        await settle(pilot)
        screen.status.set_speed(None)  # a speed measured on the fake's clock
        pilot.app.clear_notifications()

    assert snap_compare(app, terminal_size=SIZE, run_before=stopped)
