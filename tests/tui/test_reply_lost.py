"""A reply the app has shown but cannot store: a full disk, a database file replaced by
another program. The notification says the reply was not saved and what is kept; the app
goes on (nothing crashes), and nothing is written to a file that is no longer the one
opened."""

from __future__ import annotations

import os
import sqlite3

from sessions import paths
from sessions.store import SessionStore
from tests.tui.helpers import ready, send, settle, type_text, wait_for


def notices(app) -> list[str]:
    return [n.message for n in app._notifications]


async def start_held_reply(pilot, script) -> None:
    """Send a message whose reply streams one piece, then waits to be stopped."""
    script.hold_after = 1
    screen = pilot.app.screen
    screen.chat_input.focus()
    await type_text(pilot, "tell me more")
    await pilot.press("enter")
    await wait_for(pilot, lambda: screen.jobs.generating and screen.conversation_view.reply_view is not None
                   and screen.conversation_view.reply_view.body.source, "the reply to stream")


async def test_a_full_disk_while_a_reply_streams_is_said_and_the_question_kept(make_app, script, small_disk,
                                                                               monkeypatch):
    small_disk.need_mount()
    monkeypatch.setenv("LLAMACHAT_DATA_DIR", str(small_disk.folder))
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        await start_held_reply(pilot, script)
        filler = small_disk.fill()
        await pilot.press("escape")  # stop it: the text so far would be kept, but the disk is full
        await settle(pilot)
        question = screen.controller.snapshot().head
        assert question.text == "tell me more"
        words = next(n for n in notices(app) if "was not saved" in n)
        assert words.startswith("the reply (")
        assert f"is full; your question (message {question.id}) was saved before it and is kept" in words
        filler.unlink()
    with SessionStore.open() as store:
        assert [m.text for m in store.messages(1)][-1] == "tell me more"


async def test_a_reply_to_a_database_replaced_meanwhile_is_said_lost(make_app, script):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await start_held_reply(pilot, script)
        db = paths.database_file()
        copy = db.with_name("copy.sqlite3")
        with sqlite3.connect(db) as source, sqlite3.connect(copy) as target:
            source.backup(target)
        os.replace(copy, db)  # another program puts another file at the path
        await pilot.press("escape")
        await settle(pilot)
        words = next(n for n in notices(app) if "was not saved" in n)
        assert "was replaced or moved by another program" in words
    with SessionStore.open() as store:  # the file now at the path got nothing more
        assert [m.role for m in store.messages(1)] == ["user", "assistant", "user"]
