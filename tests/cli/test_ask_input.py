"""What ``llamachat ask`` is asked and how: standard input, UTF-8, and the sampling flags,
saved with a new chat and honoured when it is reopened (``--regenerate`` included)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sessions.store import SessionStore
from sessions.synth import make_model

pytestmark = pytest.mark.engine


def run(*argv: str | bytes, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "sessions.cli", "ask", *argv], input=stdin,
                          capture_output=True, env=os.environ.copy(), timeout=120)


def ok(done: subprocess.CompletedProcess[bytes]) -> dict:
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stderr.decode().strip().splitlines()[-1])
    stats["stdout"] = done.stdout.decode()
    return stats


def one_line_error(done: subprocess.CompletedProcess[bytes]) -> str:
    err = done.stderr.decode()
    assert done.returncode == 1 and done.stdout == b""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    return err


@pytest.fixture
def model() -> str:
    return str(make_model("llama", "tiny"))


def question_of(stats: dict) -> str:
    with SessionStore.open() as store:
        return store.get_message(stats["parent"]).text


def test_the_message_comes_from_standard_input(model):
    piped = ok(run("-m", model, "--max-tokens", "3", "--stats", stdin=b"What is a llama?\n"))
    assert question_of(piped) == "What is a llama?"
    dash = ok(run("-m", model, "--max-tokens", "3", "--stats", "-", stdin="Ünïcode from a file".encode()))
    assert question_of(dash) == "Ünïcode from a file"
    given = ok(run("-m", model, "--max-tokens", "3", "--stats", "from the arguments", stdin=b"ignored"))
    assert question_of(given) == "from the arguments"
    assert "TEXT is required" in one_line_error(run("-m", model, stdin=b""))


def test_invalid_utf8_is_one_sentence(model):
    err = one_line_error(run("-m", model, stdin=b"caf\xe9 au lait"))
    assert "standard input is not UTF-8 text (byte 0xe9 at offset 3)" in err
    err = one_line_error(run("-m", model, b"caf\xe9"))
    assert "the message is not UTF-8 text (byte 0xe9 at character 4)" in err


def test_sampling_flags_are_checked_like_the_config(model):
    assert "top-p must be at most 1" in one_line_error(run("-m", model, "--top-p", "2", "hi"))
    assert "top-k must be a whole number" in one_line_error(run("-m", model, "--top-k", "many", "hi"))
    assert "repeat penalty must be at least 0" in one_line_error(run("-m", model, "--repeat-penalty", "-1", "hi"))


def test_a_new_chat_keeps_its_flags_and_a_reopened_one_uses_them(model):
    first = ok(run("-m", model, "--temp", "0", "--top-k", "5", "--top-p", "0.5", "--min-p", "0.1",
                   "--repeat-penalty", "1.1", "--max-tokens", "8", "--stats", "Tell me about the sea."))
    with SessionStore.open() as store:
        sampling = store.get_session(first["session"]).sampling
    assert (sampling.temperature, sampling.top_k, sampling.top_p, sampling.min_p, sampling.repeat_penalty,
            sampling.max_tokens) == (0.0, 5, 0.5, 0.1, 1.1, 8)

    # Reopened without flags: the chat's greedy settings, not the config's 0.8, write the same reply.
    again = ok(run("--session", str(first["session"]), "-m", model, "--stats",
                   "--regenerate", str(first["message"])))
    assert again["message"] != first["message"] and again["stdout"] == first["stdout"]
    assert again["tokens_generated"] == first["tokens_generated"] <= 8

    # A flag on an existing chat applies to that reply only.
    ok(run("--session", str(first["session"]), "-m", model, "--max-tokens", "2", "--stats", "More."))
    with SessionStore.open() as store:
        assert store.get_session(first["session"]).sampling == sampling
