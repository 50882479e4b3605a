"""``llamachat ask --file``: text files sent with the message, in real processes on a tiny model.

The question is stored with each file after it in a fenced block; a file that cannot be
attached is one line on stderr, exit status 1, before any model is loaded and with
nothing saved.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sessions.store import SessionStore
from sessions.synth import make_model
from tests.cli_support import assert_one_line_error

pytestmark = pytest.mark.engine


def ask(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sessions.cli", "ask", "--temp", "0", "--max-tokens", "4",
                           "--stats", *argv], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=os.environ.copy(), timeout=120)


@pytest.fixture
def model() -> str:
    return str(make_model("llama", "tiny"))


def test_each_file_follows_the_question_in_a_fenced_block(model, tmp_path):
    (tmp_path / "notes.txt").write_text("Llamas hum.\n")
    (tmp_path / "code.md").write_text("```py\nprint('hi')\n```\n")
    done = ask("-m", model, "--file", str(tmp_path / "notes.txt"), "--file", str(tmp_path / "code.md"),
               "What do these say?")
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stderr.strip().splitlines()[-1])
    with SessionStore.open() as store:
        question = store.get_message(stats["parent"])
    assert question.text == ("What do these say?\n\n```notes.txt\nLlamas hum.\n```\n\n"
                             "````code.md\n```py\nprint('hi')\n```\n````")


def test_a_file_alone_is_a_message(model, tmp_path):
    (tmp_path / "q.txt").write_text("Why is the sky blue?")
    done = ask("-m", model, "--file", str(tmp_path / "q.txt"))
    assert done.returncode == 0, done.stderr
    with SessionStore.open() as store:
        question = store.get_message(json.loads(done.stderr.strip().splitlines()[-1])["parent"])
    assert question.text == "```q.txt\nWhy is the sky blue?\n```"


@pytest.mark.parametrize("kind", ["binary", "fifo", "missing"])
def test_a_file_that_cannot_be_attached_is_one_line_and_nothing_is_saved(model, tmp_path, kind):
    path = tmp_path / "thing.txt"
    if kind == "binary":
        path.write_bytes(b"\x7fELF\0\0\0")
    elif kind == "fifo":
        os.mkfifo(path)
    words = {"binary": "it holds NUL bytes", "fifo": "not a regular file", "missing": "no such file"}[kind]
    done = ask("-m", model, "--file", str(path), "Read this")
    assert_one_line_error(done.returncode, done.stdout, done.stderr, words)
    assert "cannot attach " in done.stderr
    with SessionStore.open() as store:
        assert store.list_sessions() == []


def test_a_file_longer_than_the_context_is_refused_after_the_load(model, tmp_path):
    (tmp_path / "long.txt").write_text("llama " * 600)
    done = ask("-m", model, "-c", "256", "--file", str(tmp_path / "long.txt"), "Summarise")
    assert_one_line_error(done.returncode, done.stdout, done.stderr,
                          "cannot attach long.txt: its ")
    assert "more than the model's context of 256" in done.stderr


def test_file_goes_with_a_message_only(model, tmp_path):
    (tmp_path / "a.txt").write_text("a")
    done = ask("-m", model, "--session", "1", "--regenerate", "2", "--file", str(tmp_path / "a.txt"))
    assert_one_line_error(done.returncode, done.stdout, done.stderr, "takes no TEXT and no --file")


def test_a_file_just_over_the_limit_is_told_in_bytes(tmp_path):
    """2,000,001 bytes used to read "larger than the 2.0 MB (2.0 MB)"."""
    from sessions.attachments import MAX_ATTACHMENT_BYTES, AttachmentError, read_attachment

    path = tmp_path / "notes.txt"
    path.write_bytes(b"a" * (MAX_ATTACHMENT_BYTES + 1))
    with pytest.raises(AttachmentError) as refused:
        read_attachment(path)
    assert str(refused.value) == (f"cannot attach notes.txt: it is {MAX_ATTACHMENT_BYTES + 1:,} bytes, more than "
                                  f"the {MAX_ATTACHMENT_BYTES:,} bytes an attachment may be")
