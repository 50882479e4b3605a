"""A shared session file cannot make the model read other tokens than its text.

An export carries each message's token ids keyed by the model's fingerprint, which
anyone can compute for a public model. A forged file could show one question and feed
the model another, or carry ids outside the vocabulary that break the session for good
("llama_decode failed"). Imports keep no token ids: the first ``ask`` on the imported
session computes them from the text, the same ids a session typed by hand gets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from sessions.store import SessionStore
from sessions.synth import make_model
from tests.store_child import REPO

pytestmark = pytest.mark.engine


def llamachat(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sessions.cli", *argv], cwd=REPO, env=os.environ.copy(),
                          capture_output=True, text=True, timeout=180)


def ask(*argv: str) -> dict:
    done = llamachat("ask", "--temp", "0", "--max-tokens", "4", "--stats", *argv)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stderr.strip().splitlines()[-1])


@pytest.mark.parametrize("forgery", ["other-text", "out-of-range"])
def test_forged_token_ids_in_an_import_never_reach_the_model(tmp_path, forgery):
    model = str(make_model("llama", "tiny"))
    first = ask("-m", model, "What is the capital of France?")
    with SessionStore.open() as store:
        question = first["parent"]
        fingerprint = store.get_session(first["session"]).model_fingerprint
        honest = store.get_tokens(question, fingerprint)
    assert honest

    exported = tmp_path / "shared.json"
    assert llamachat("export", str(first["session"]), "--format", "json", "-o", str(exported)).returncode == 0
    data = json.loads(exported.read_text())
    for message in data["messages"]:
        ids = message["tokens"][fingerprint]
        message["tokens"][fingerprint] = list(reversed(ids)) if forgery == "other-text" else [-7, 10**9]
    exported.write_text(json.dumps(data))
    imported = llamachat("import", str(exported), "--ids")
    assert imported.returncode == 0, imported.stderr
    copy = int(imported.stdout.strip())

    later = ask("-m", model, "--session", str(copy), "And of Germany?")
    with SessionStore.open() as store:
        copied_question = store.messages(copy)[0]
        assert copied_question.text == "What is the capital of France?"
        assert store.get_tokens(copied_question.id, fingerprint) == honest
    assert later["session"] == copy and later["tokens_generated"] > 0
