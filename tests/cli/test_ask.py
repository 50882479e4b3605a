"""``llamachat ask`` end to end on a tiny real model, one process per call.

Each call is a fresh process (a restart), so these tests also prove that checkpoints
written by one run are restored by the next: the ``--stats`` line must show that only
the new message's tokens were evaluated.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sessions.synth import make_model

pytestmark = pytest.mark.engine


def ask(*argv: str) -> tuple[str, dict]:
    done = subprocess.run(
        [sys.executable, "-m", "sessions.cli", "ask", "--temp", "0", "--max-tokens", "12", "--stats", *argv],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    stats = json.loads(done.stderr.strip().splitlines()[-1])
    return done.stdout, stats


def ask_fails(*argv: str) -> str:
    command = [sys.executable, "-m", "sessions.cli", "ask", *argv]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    return done.stderr


@pytest.fixture
def model() -> str:
    return str(make_model("llama", "tiny"))


def test_ask_start_fork_edit_regenerate_continue(model):
    text, first = ask("-m", model, "Hello there, how are you?")
    assert text.strip() and first["tokens_restored"] == 0 and first["tokens_evaluated"] > 0
    session, reply1 = first["session"], first["message"]
    user1 = first["parent"]

    _, second = ask("--session", str(session), "Tell me more about it.")
    # The restart restored the whole first turn from disk; only the new message was evaluated.
    assert second["tokens_restored"] == first["tokens_evaluated"] + first["tokens_generated"]
    new_tokens = second["tokens_evaluated"]
    assert 0 < new_tokens < 60

    _, regen = ask("--session", str(session), "--regenerate", str(second["message"]))
    assert regen["parent"] == second["parent"]
    assert regen["message"] != second["message"]
    assert regen["tokens_evaluated"] == 0  # the prompt's state and logits were saved

    _, fork = ask("--session", str(session), "--at", str(reply1), "A different question instead.")
    assert fork["tokens_restored"] == second["tokens_restored"]  # shares the first turn
    assert 0 < fork["tokens_evaluated"] < 60

    _, edit = ask("--session", str(session), "--edit", str(user1), "Hello, who are you?")
    assert edit["tokens_restored"] == 0  # nothing precedes the first message

    _, cont = ask("--session", str(session), "And then?")
    assert cont["parent"] != fork["message"]
    assert cont["tokens_restored"] == edit["tokens_evaluated"] + edit["tokens_generated"]

    shown = subprocess.run([sys.executable, "-m", "sessions.cli", "show", str(session), "--json"],
                           capture_output=True, text=True, check=True)
    messages = json.loads(shown.stdout)["messages"]
    assert len(messages) == 2 + 2 + 1 + 2 + 2 + 2  # every branch kept


def test_ask_user_errors(model):
    assert "no session 42" in ask_fails("-m", model, "--session", "42", "hi")
    assert "TEXT is required" in ask_fails("-m", model)
    assert "need --session" in ask_fails("-m", model, "--at", "3", "hi")
    assert "no model" in ask_fails("hi")
    assert "not a GGUF" in ask_fails("-m", __file__, "hi")
