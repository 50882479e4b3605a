"""Snapshots of deleting and bringing back: the question that names what goes (from the
chat, for a whole chat, and where nothing can be brought back), and the toasts after a
deletion and after Ctrl+Z. (The question asked from the tree is
``test_what_you_see_snapshots.test_delete_in_the_tree_names_the_node``.)

The chat is ``test_main_snapshots``' (fixed texts and times), at its size.
"""

from __future__ import annotations

from textual.widgets._toast import Toast

from sessions.config import Config
from tests.tui.helpers import wait_for
from tests.tui.test_main_snapshots import SIZE, quiet, write_chat
from tui.screens.dialogs import ConfirmScreen
from tui.startup import StartupRequest


async def toast_shown(pilot, words: str) -> None:
    """Wait until a toast on screen says ``words``."""
    await wait_for(pilot, lambda: any(words in str(toast.render()) for toast in pilot.app.screen.query(Toast)),
                   f"the toast {words!r}")


async def ask_to_delete_the_last_question(pilot) -> None:
    await quiet(pilot)
    await pilot.press("ctrl+up", "ctrl+up", "f8")  # "And a tuple?" and its reply
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen), "the question")


def test_delete_from_the_chat_counts_the_messages_below(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))
    assert snap_compare(app, terminal_size=SIZE, run_before=ask_to_delete_the_last_question)


def test_delete_that_cannot_be_undone_has_cancel_focused(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)), config=Config(undo_minutes=0),
                   undo_seconds=0)
    assert snap_compare(app, terminal_size=SIZE, run_before=ask_to_delete_the_last_question)


def test_delete_the_chat_names_its_title_and_size(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def ask(pilot):
        await quiet(pilot)
        await pilot.press("ctrl+delete")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen), "the question")

    assert snap_compare(app, terminal_size=SIZE, run_before=ask)


async def delete_the_last_question(pilot) -> None:
    await ask_to_delete_the_last_question(pilot)
    await pilot.press("y")
    await toast_shown(pilot, "Deleted 2 messages. ^z brings it back.")


def test_the_toast_after_a_delete_names_the_undo_key(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))
    assert snap_compare(app, terminal_size=SIZE, run_before=delete_the_last_question)


def test_the_toast_after_ctrl_z_says_what_came_back(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def bring_back(pilot):
        await delete_the_last_question(pilot)
        pilot.app.clear_notifications()
        await pilot.press("ctrl+z")
        await toast_shown(pilot, "Brought back 2 messages.")

    assert snap_compare(app, terminal_size=SIZE, run_before=bring_back)
