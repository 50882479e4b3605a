"""The app while other processes use the same session: ``llamachat ask`` in another
terminal, a program that replaces the database file.

The app runs here through Pilot (over the fake engine); ``ask`` runs as a real process
over a tiny real model (``tests.ask_process``). A gesture made on a chat that changed
elsewhere is refused in one sentence, nothing is written, the chat is shown as it is now
and what was typed stays in the box; sending again then works.
"""

from __future__ import annotations

import os
import sqlite3

import pytest
from textual.widgets import Static

from sessions import paths
from sessions.store import SessionStore
from sessions.synth import make_model
from tests.ask_process import other_terminal, other_terminal_asked, printed_some_reply
from tests.tui.fake_engine import FakeScript
from tests.tui.helpers import ready, send, settle, shown_texts, type_text, wait_for
from tui.screens.dialogs import ConfirmScreen

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def model() -> str:
    return str(make_model("llama", "tiny"))


@pytest.fixture
def script() -> FakeScript:
    """The fake engine counts a byte as a token: room for a long reply of the real model."""
    return FakeScript(n_ctx=1 << 16)


def texts_stored(session_id: int = 1) -> list[str]:
    with SessionStore.open() as store:
        return [m.text for m in store.messages(session_id)]


def last_notice(app) -> str:
    return list(app._notifications)[-1].message


async def submit(pilot, text: str) -> None:
    screen = pilot.app.screen
    screen.chat_input.focus()
    await type_text(pilot, text)
    await pilot.press("enter")
    await pilot.pause()


async def test_a_send_after_another_terminal_changed_the_chat_is_refused_then_goes_on(make_app, model):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        other_terminal_asked(model, "--session", "1", "from the terminal")
        await submit(pilot, "mine")
        await wait_for(pilot, lambda: "changed in another window" in last_notice(app), "the refusal")
        assert "mine" not in texts_stored()
        assert screen.chat_input.text == "mine"  # kept, to send again
        await wait_for(pilot, lambda: ("user", "from the terminal") in shown_texts(screen), "the chat read again")
        await pilot.press("enter")
        await settle(pilot)
        stored = texts_stored()
        assert stored.index("mine") > stored.index("from the terminal")
        assert [role for role, _ in shown_texts(screen)] == ["user", "assistant"] * 3


async def test_the_app_refuses_to_send_while_another_terminal_writes_a_reply(make_app, model):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        other = other_terminal(model, "--session", "1", "long one")
        try:
            other.read_until(printed_some_reply, "the other reply to stream")
            await submit(pilot, "mine")
            await wait_for(pilot, lambda: "writing a reply in this chat" in last_notice(app), "the refusal")
            assert screen.chat_input.text == "mine" and "mine" not in texts_stored()
            assert other.drain() == 0, other.stderr
        finally:
            other.kill()
        await pilot.press("enter")  # the chat shown is older than the other reply: read again
        await wait_for(pilot, lambda: "changed in another window" in last_notice(app), "the second refusal")
        await pilot.press("enter")
        await settle(pilot)
        assert texts_stored()[-2] == "mine"


async def test_f8_deletes_only_what_it_counted(make_app, model):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        await pilot.press("f8")  # the last reply: 1 message
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirm dialog")
        assert "1 message will be deleted" in str(app.screen.query_one("#dialog-question", Static).render())
        other_terminal_asked(model, "--session", "1", "added below it meanwhile")
        await pilot.press("y")
        await wait_for(pilot, lambda: "changed in another window" in last_notice(app), "the refusal")
        assert "nothing was deleted" in last_notice(app)
        assert len(texts_stored()) == 4
        await wait_for(pilot, lambda: ("user", "added below it meanwhile") in shown_texts(screen), "the new branch")


async def test_a_database_replaced_by_another_program_is_said_and_nothing_more_written(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        db = paths.database_file()
        copy = db.with_name("copy.sqlite3")
        with sqlite3.connect(db) as source, sqlite3.connect(copy) as target:
            source.backup(target)
        os.replace(copy, db)  # a sync tool or a restore put another file at the path
        before = texts_stored()
        await submit(pilot, "after the swap")
        await wait_for(pilot, lambda: "was replaced or moved by another program" in last_notice(app), "the notice")
        assert screen.chat_input.text == "after the swap"
        assert texts_stored() == before


async def test_a_chat_renamed_elsewhere_shows_its_new_title_once_the_app_has_the_focus_again(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello there")
        await pilot.press("ctrl+l")  # the session list shows the title too
        session_id = screen.controller.session_id
        app.app_focus = False  # the user goes to another terminal and runs `llamachat rename`
        with SessionStore.open() as store:
            store.rename_session(session_id, "Greetings")
        app.app_focus = True
        await wait_for(pilot, lambda: str(screen.conversation_view.border_title) == "Greetings", "the new title")
        assert "Greetings" in str(screen.session_list.options.get_option_at_index(0).prompt)


async def test_a_chat_renamed_in_another_shell_shows_its_new_title_without_a_focus_change(make_app):
    """The walk-through's steps: `llamachat rename` in another tmux window; the terminal told
    the app nothing, and the header kept the old title for more than 20 s."""
    from sessions.cli import main

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello there")
        session_id = screen.controller.session_id
        assert main(["rename", str(session_id), "Greetings"]) == 0
        await wait_for(pilot, lambda: str(screen.conversation_view.border_title) == "Greetings", "the new title")
