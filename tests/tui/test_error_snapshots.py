"""Snapshots of errors shown to the user: a model file that cannot be loaded, a model's chat
template refused (ChatML stands in), a template that rejects the conversation, and the
session database replaced by another program while the chat is open. Each is one sentence
on screen, and the chat stays.

(A full disk under the database is said in the same way; its test needs a small file system
of its own, mounted as root, and is ``test_reply_lost``'s: a snapshot test skipped where
mounting is not allowed would leave its picture unused, which fails the run.)
"""

from __future__ import annotations

import os
import sqlite3

from sessions import paths
from sessions.store import SessionStore
from sessions.templates.chat_template import ChatTemplate
from tests.tui.helpers import main_screen, ready, type_text, wait_for
from tests.tui.test_delete_snapshots import toast_shown
from tests.tui.test_hostile_models import HOSTILE_TEMPLATE, RealForOtherFiles
from tests.tui.test_main_snapshots import SIZE, quiet
from tests.tui.test_what_you_see_snapshots import write_chat
from tui.startup import StartupRequest


def test_a_file_that_is_not_a_model(snap_compare, make_app, script, tmp_path):
    """Loaded by llama.cpp's own loader, which refuses it before reading a tensor."""
    notes = tmp_path / "notes.gguf"
    notes.write_text("These are my notes, not a model.\n")
    app = make_app(startup=StartupRequest(model_path=notes))
    app.controller._factory = RealForOtherFiles(script)

    async def refused(pilot):
        screen = main_screen(pilot)
        await toast_shown(pilot, "Could not load the model: not a GGUF file: notes.gguf")
        await wait_for(pilot, lambda: screen.gestures.idle and screen.status.text_of("model") == "no model", "no model")
        screen.chat_input.cursor_blink = False

    assert snap_compare(app, terminal_size=SIZE, run_before=refused)


def test_a_model_template_refused_at_load(snap_compare, make_app, fake_model, script):
    script.template = ChatTemplate.load(HOSTILE_TEMPLATE)  # the sandbox refuses it: ChatML instead
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, "An answer.")))

    async def told(pilot):
        screen = await ready(pilot)
        screen.chat_input.cursor_blink = False
        await toast_shown(pilot, "using the ChatML template instead")

    assert snap_compare(app, terminal_size=SIZE, run_before=told)


def test_a_template_that_rejects_the_conversation(snap_compare, make_app, fake_model, script, shared_dir):
    """Gemma's template wants the roles to alternate; an imported chat can hold two
    questions in a row, and answering it is refused in the template's words."""
    source = (shared_dir / "templates" / "google-gemma-2-2b-it.jinja").read_text()
    script.template = ChatTemplate.compile(source, name="gemma-2")
    with SessionStore.open() as store:
        session = store.create_session(model_path=str(fake_model), model_fingerprint="fake-" + fake_model.name,
                                       created_at=0.0)
        essay = store.add_message(session.id, None, "user", "Here is my essay: llamas hum.", created_at=1.0)
        question = store.add_message(session.id, essay.id, "user", "Is it too short?", created_at=2.0)
        store.set_active_leaf(session.id, question.id)
    app = make_app(startup=StartupRequest(session_id=session.id))

    async def rejected(pilot):
        await quiet(pilot)  # opening it said so already (the branch could not be prepared)
        await pilot.press("ctrl+r")
        await toast_shown(pilot, "Could not write the reply: the model's chat template rejected")

    assert snap_compare(app, terminal_size=SIZE, run_before=rejected)


def test_a_database_replaced_meanwhile_refuses_a_message_and_keeps_it(snap_compare, make_app, fake_model, tmp_path,
                                                                      monkeypatch):
    """Another program puts another file at the database's path while the chat is open (a
    sync tool, a restore): nothing more is written, and the message typed stays in the box.
    The folder is named relative to the working folder, so that the sentence names the same
    path everywhere."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LLAMACHAT_DATA_DIR", "data")
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, "An answer.")))

    async def refused(pilot):
        await quiet(pilot)
        db = paths.database_file()
        copy = db.with_name("copy.sqlite3")
        with sqlite3.connect(db) as source, sqlite3.connect(copy) as target:
            source.backup(target)
        os.replace(copy, db)
        await type_text(pilot, "One more question")
        await pilot.press("enter")
        await toast_shown(pilot, "was replaced or moved by another program")

    assert snap_compare(app, terminal_size=SIZE, run_before=refused)
