"""A full data disk while a reply streams: the reply cannot be stored, and the error says
so, naming what was lost (the reply) and what is kept (the question, stored before).

The disk is real: a 2 MiB file system of its own holds the data folder
(``tests.fs_support``), filled while ``llamachat ask`` is held in the middle of its reply.
"""

from __future__ import annotations

import os

import pytest

from sessions.store import SessionStore
from sessions.synth import make_model
from tests.ask_process import HELD_REPLY_TOKENS, other_terminal, printed_some_reply

pytestmark = pytest.mark.engine


def test_a_reply_that_meets_a_full_disk_is_reported_lost_and_its_question_kept(small_disk, tmp_path):
    small_disk.need_mount()
    model = str(make_model("llama", "tiny"))
    env = dict(os.environ, LLAMACHAT_DATA_DIR=str(small_disk.folder))
    process = other_terminal(model, "long one", env=env)
    try:
        process.read_until(printed_some_reply, "the reply to stream")  # the question is stored
        filler = small_disk.fill()
        status = process.drain()
    finally:
        process.kill()
    assert status == 1
    db = small_disk.folder / "sessions.sqlite3"
    assert process.stderr_lines() == [
        f"llamachat: error: the reply ({HELD_REPLY_TOKENS} tokens) was not saved: the disk holding the session "
        f"database {db} is full; your question (message 1) was saved before it and is kept. Free some space, "
        "then ask again"]
    assert len(process.out) > 4096  # the whole reply was shown
    filler.unlink()
    with SessionStore.open(db) as store:
        assert [(m.role, m.text) for m in store.messages(1)] == [("user", "long one")]
