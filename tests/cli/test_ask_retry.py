"""``llamachat ask`` on a model whose template wants alternating roles (Gemma's): a failed
ask, retried or followed by another, never leaves two user messages in a row, never stores
its question twice, and ``--trim`` then answers it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sessions.store import SessionStore
from sessions.synth import make_model
from tests.cli_support import long_turns

pytestmark = pytest.mark.engine

TURN = "The quick brown fox jumps over the lazy dog near the river bank today. " * 12


def ask(*argv: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "sessions.cli", "ask", "--temp", "0", "--max-tokens", "6", *argv],
                          capture_output=True, text=True, env=os.environ.copy(), timeout=120)
    assert (done.returncode == 0) == ok, done.stderr
    assert "Traceback" not in done.stderr
    return done


@pytest.fixture
def gemma_model(shared_dir) -> str:
    source = (shared_dir / "templates" / "google-gemma-2-2b-it.jinja").read_text()
    return str(make_model("llama", "tiny", markers="gemma", chat_template=source))


@pytest.fixture
def long_session() -> int:
    """Three turns of about 400 tokens each: longer than a 1,024-token context."""
    with SessionStore.open() as store:
        return long_turns(store, TURN)


def branch(session: int) -> list[tuple[str, str]]:
    with SessionStore.open() as store:
        tree = store.load_tree(session)
        head = store.get_session(session).active_leaf_id
        return [(m.role, m.text) for m in tree.path_to(head)]


def user_messages(session: int) -> list[str]:
    with SessionStore.open() as store:
        return [m.text for m in store.messages(session) if m.role == "user"]


def alternates(path: list[tuple[str, str]]) -> bool:
    return all(not (a[0] == b[0] == "user") for a, b in zip(path, path[1:], strict=False))


def test_a_failed_ask_retried_stores_its_question_once_and_trim_answers_it(gemma_model, long_session):
    s = str(long_session)
    failed = ask("-m", gemma_model, "-c", "1024", "--session", s, "short", ok=False)
    assert "--trim" in failed.stderr and len(failed.stderr.splitlines()) == 1
    ask("-m", gemma_model, "-c", "1024", "--session", s, "short", ok=False)  # the same again
    assert user_messages(long_session).count("short") == 1
    assert branch(long_session)[-1] == ("user", "short")

    done = ask("-m", gemma_model, "-c", "1024", "--session", s, "--trim", "short")
    assert done.stdout.strip()
    path = branch(long_session)
    assert path[-1][0] == "assistant" and path[-2] == ("user", "short") and alternates(path)
    assert user_messages(long_session).count("short") == 2  # once waiting in the long branch, once trimmed


def test_another_question_after_a_failed_ask_goes_beside_the_waiting_one(gemma_model, long_session):
    """A retry never merges two questions: the new one is a version of its own."""
    s = str(long_session)
    ask("-m", gemma_model, "-c", "1024", "--session", s, "short", ok=False)
    ask("-m", gemma_model, "-c", "1024", "--session", s, "and another thing", ok=False)
    path = branch(long_session)
    assert path[-1] == ("user", "and another thing") and alternates(path)
    assert "short" in user_messages(long_session)  # the first stays, as the earlier version
    assert not any("short" in text and "another" in text for text in user_messages(long_session))

    done = ask("-m", gemma_model, "-c", "1024", "--session", s, "--trim")  # answers what waits
    assert done.stdout.strip() and "roles must alternate" not in done.stderr
    path = branch(long_session)
    assert path[-2] == ("user", "and another thing") and alternates(path)


def test_a_model_that_cannot_load_stores_nothing(long_session, tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + bytes(64))
    before = user_messages(long_session)
    for _ in range(2):
        ask("-m", str(bad), "--session", str(long_session), "short", ok=False)
    assert user_messages(long_session) == before
