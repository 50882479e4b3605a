"""Snapshots of the chat screen and the help screen at a fixed terminal size.

The conversation is written straight into the store (fixed texts, times and stats), so
the pictures only change when the screen's layout or styling does.
"""

from __future__ import annotations

from sessions.store import SessionStore
from sessions.tree import GenerationStats
from tests.tui.helpers import ready
from tui.startup import StartupRequest

SIZE = (100, 30)


def write_chat(model_path) -> int:
    """A chat whose first reply has two versions (the second one shown) and a code block."""
    with SessionStore.open() as store:
        session = store.create_session(model_path=str(model_path), model_fingerprint="fake-" + model_path.name,
                                       created_at=0.0)
        ask = store.add_message(session.id, None, "user", "How do I reverse a list in Python?", created_at=1.0)
        store.add_message(session.id, ask.id, "assistant", "Use `items.reverse()`.",
                          stats=GenerationStats(tokens_generated=8, stop_reason="eog"), created_at=2.0)
        reply = store.add_message(
            session.id, ask.id, "assistant",
            "Slice it:\n\n```python\nitems[::-1]\n```\n\nor call `items.reverse()` to reverse **in place**.",
            stats=GenerationStats(tokens_generated=23, stop_reason="eog"), created_at=3.0)
        again = store.add_message(session.id, reply.id, "user", "And a tuple?", created_at=4.0)
        last = store.add_message(session.id, again.id, "assistant", "Tuples slice the same way: `(1, 2, 3)[::-1]`.",
                                 stats=GenerationStats(tokens_generated=12, stop_reason="length"), created_at=5.0)
        store.set_active_leaf(session.id, last.id)
        return session.id


async def quiet(pilot) -> None:
    """Wait for the model, clear the start-up notices (they fade out on their own) and stop
    the input's cursor blinking, so every picture is taken in the same state."""
    screen = await ready(pilot)
    pilot.app.clear_notifications()
    screen.chat_input.cursor_blink = False
    await pilot.pause()


def test_main_screen(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))
    assert snap_compare(app, terminal_size=SIZE, run_before=quiet)


def test_main_screen_with_a_selected_message_and_the_tree(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def select_and_open_tree(pilot):
        await quiet(pilot)
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+t")
        await pilot.app.workers.wait_for_complete()  # the saved-state marks, read in a worker
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=select_and_open_tree)


def test_help_screen(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def open_help(pilot):
        await quiet(pilot)
        await pilot.press("f1")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=open_help)
