"""Snapshots of going on from a place inside a reply (Alt+G): the cursor placed inside the
reply, the refusal of its end, and the new version written on from the place chosen.

The chats are written straight into the store (fixed texts and times), at the size of
``test_main_snapshots``.
"""

from __future__ import annotations

from textual.widgets import Static, TextArea

from sessions.store import SessionStore
from sessions.tree import GenerationStats
from tests.tui.helpers import reply_text, wait_for
from tests.tui.test_main_snapshots import SIZE, quiet
from tui.screens.cut_point import CutPoint
from tui.startup import StartupRequest

REPLY = "Roses are red,\nviolets are blue,\nsugar is sweet,\nand so are you."
KEPT = "Roses are red,\nviolets are"
"""Where the cursor is put: two lines up from the end, then to the word's end."""


def chat(model_path) -> int:
    """A question and a reply the loaded model wrote (only its own replies can be cut inside)."""
    fingerprint = "fake-" + model_path.name
    with SessionStore.open() as store:
        session = store.create_session(model_path=str(model_path), model_fingerprint=fingerprint, created_at=0.0)
        ask = store.add_message(session.id, None, "user", "Finish the rhyme", created_at=1.0)
        reply = store.add_message(session.id, ask.id, "assistant", REPLY, created_at=2.0,
                                  stats=GenerationStats(tokens_generated=len(REPLY), stop_reason="eog",
                                                        sampled_by=fingerprint))
        store.set_active_leaf(session.id, reply.id)
        return session.id


async def open_cut_point(pilot) -> CutPoint:
    await quiet(pilot)
    await pilot.press("alt+g")  # the last reply: nothing is selected
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, CutPoint), "the cut point dialog")
    dialog = pilot.app.screen
    dialog.query_one(TextArea).cursor_blink = False
    return dialog  # type: ignore[return-value]


async def place_the_cursor(pilot) -> CutPoint:
    dialog = await open_cut_point(pilot)
    await pilot.press("up", "up", "home", *["ctrl+right"] * 2)
    await wait_for(pilot, lambda: dialog.chosen == len(KEPT), "the cursor after “violets are”")
    return dialog


def test_the_cursor_placed_inside_the_reply(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=chat(fake_model)))
    assert snap_compare(app, terminal_size=SIZE, run_before=place_the_cursor)


def test_the_end_of_the_reply_is_refused(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=chat(fake_model)))

    async def at_the_end(pilot):
        dialog = await open_cut_point(pilot)
        await pilot.press("enter")
        error = dialog.query_one("#dialog-error", Static)
        await wait_for(pilot, lambda: "Put the cursor inside" in str(error.render()), "the refusal")

    assert snap_compare(app, terminal_size=SIZE, run_before=at_the_end)


def test_the_new_version_goes_on_from_the_place(snap_compare, make_app, fake_model, script,
                                                every_streamed_figure_drawn):
    app = make_app(startup=StartupRequest(session_id=chat(fake_model)))

    async def going_on(pilot):
        await place_the_cursor(pilot)
        script.replies = [" green, the sky is grey, and this reply is held here"]
        script.hold_after = 5  # the space and four words, then held until the app closes
        await pilot.press("enter")
        screen = pilot.app.screen
        await wait_for(pilot, lambda: reply_text(screen).endswith("the sky is "), "the words after the place")
        screen.status.set_speed(None)  # a speed measured on the fake's clock
        pilot.app.clear_notifications()

    assert snap_compare(app, terminal_size=SIZE, run_before=going_on)
