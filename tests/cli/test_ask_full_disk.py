"""``llamachat ask`` on a nearly full data disk: the question and its tokens are stored
together or not at all, the message says which, and a retry never merges two questions.

The disk is real (a 2 MiB tmpfs of its own, ``tests.fs_support``), left with a few
dozen KB free: the sizes where a 2,000-character question used to be stored without its
tokens while the error said that nothing was saved.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sessions.synth import make_model

pytestmark = pytest.mark.engine

QUESTION = ("word " * 400).strip()
OTHER = ("a second question, " * 20).strip()


def ask(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sessions.cli", "ask", "--temp", "0", "--max-tokens", "5", *argv],
                          capture_output=True, text=True, env=env, timeout=120)


def stored(db: Path) -> list[tuple[int, str, bool]]:
    """(id, text, has tokens) of each message, read without writing (the disk is full)."""
    conn = sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        with_tokens = {row[0] for row in conn.execute("SELECT message_id FROM message_tokens")}
        return [(mid, text, mid in with_tokens) for mid, text in conn.execute("SELECT id, text FROM messages")]
    finally:
        conn.close()


@pytest.mark.parametrize("free_kb", [64, 96, 112, 128, 160])
def test_a_question_on_a_full_disk_is_stored_whole_or_not_at_all(small_disk, free_kb):
    small_disk.need_mount()
    model = str(make_model("llama", "tiny"))
    env = dict(os.environ, LLAMACHAT_DATA_DIR=str(small_disk.folder / "data"))
    assert ask(env, "-m", model, "hello").returncode == 0
    db = small_disk.folder / "data" / "sessions.sqlite3"
    before = stored(db)
    filler = small_disk.fill_leaving(free_kb * 1024)
    try:
        first = ask(env, "-m", model, "--session", "1", QUESTION)
        after_first = stored(db)
        second = ask(env, "-m", model, "--session", "1", OTHER)
        after_second = stored(db)
    finally:
        filler.unlink()
    assert "Traceback" not in first.stderr + second.stderr
    for done, was, now in ((first, before, after_first), (second, after_first, after_second)):
        new = [row for row in now if row not in was]
        assert all(has_tokens for _id, _text, has_tokens in now), now  # never a question without its tokens
        if done.returncode == 0:
            continue
        (line,) = [line for line in done.stderr.splitlines() if line.startswith("llamachat: error:")]
        questions = [row for row in new if row[1] in (QUESTION, OTHER)]
        if "nothing was saved" in line:
            assert new == [], line
        else:
            assert len(questions) == 1 and f"(message {questions[0][0]})" in line, line
    assert not any(QUESTION in text and OTHER in text for _id, text, _ in after_second)
