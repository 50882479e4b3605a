"""Quitting the app right after opening a large imported chat is prompt, and loses nothing.

A chat imported from a file has no tokens for the model yet: opening it computes and
stores the tokens of its branch, message by message (``sessions.controller.branch_tokens``). They
used to be stored one transaction per message, and quitting waited for all of them:
some 20 s for 5,000 messages. Now they are stored in batches, the quit stops the work
between two messages, and what was computed is stored whole; the rest is computed the
next time the chat is used. A real app in a pseudo-terminal (``tests.pty_app``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sessions.controller.branch_tokens import freeze_all
from sessions.exchange import export_json
from sessions.store import SessionStore
from sessions.synth import make_model
from tests.pty_app import PtyApp

pytestmark = pytest.mark.engine

MESSAGES = 5000
LAST = "the very last turn of the imported chat"
QUIT_WITHIN = 2.0


def chat_file(tmp_path: Path) -> Path:
    """An export of one chat of ``MESSAGES`` messages, written in another database."""
    with SessionStore.open(tmp_path / "elsewhere" / "sessions.sqlite3") as store:
        session = store.create_session(title="a long imported chat")
        head = None
        with store.transaction():
            for i in range(MESSAGES):
                text = LAST if i == MESSAGES - 1 else f"turn {i}: " + "some words " * 6
                head = store.add_message(session.id, head, "user" if i % 2 == 0 else "assistant", text).id
        store.set_active_leaf(session.id, head)
        exported = export_json(store, session.id)
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(exported))
    return path


def test_quitting_half_a_second_after_opening_a_freshly_imported_chat_is_prompt(tmp_path):
    env = dict(os.environ)
    done = subprocess.run([sys.executable, "-m", "sessions.cli", "import", str(chat_file(tmp_path))],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    app = PtyApp("-m", str(make_model("llama", "tiny")), "--session", "1", env=env)
    try:
        app.read_until(lambda a: LAST in a.text, "the imported chat to open")
        time.sleep(0.5)  # the scenario itself: a quit half a second after the chat opened
        asked = time.monotonic()
        app.type(b"\x11")  # Ctrl+Q
        assert app.wait() == 0, app.text[-2000:]
        took = time.monotonic() - asked
    finally:
        app.kill()
    assert took < QUIT_WITHIN, f"the app took {took:.1f} s to quit"
    with SessionStore.open() as store:
        path = store.load_tree(1).path_to(store.get_session(1).active_leaf_id)
        assert len(path) == MESSAGES and path[-1].text == LAST  # nothing lost
        fingerprints = {fp for lists in store.session_tokens(1).values() for fp in lists}
        assert len(fingerprints) <= 1
        if fingerprints:
            (fingerprint,) = fingerprints
            stored = store.session_tokens(1)
            kept = [message for message in path if fingerprint in stored.get(message.id, {})]
            assert kept == path[:len(kept)]  # the branch's first messages, in order, none skipped
            assert len(kept) < MESSAGES  # the quit did stop the work
            check_whole(kept, [stored[message.id][fingerprint] for message in kept])


def check_whole(messages, lists) -> None:
    """Each stored list is the message's whole list, as a fresh computation gives it."""
    from sessions.api.chat import SessionController
    from sessions.engine.factory import llama_engine_factory
    from sessions.engine.settings import EngineSettings

    with SessionStore.open() as store:
        controller = SessionController(store, engine_factory=llama_engine_factory(EngineSettings()))
        try:
            controller.load_model(make_model("llama", "tiny"))
            assert freeze_all(controller.engine, messages) == lists
        finally:
            controller.close()
