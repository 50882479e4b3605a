"""``llamachat ask --rpc`` as a user runs it: real processes, real servers on loopback.

A chat over two servers goes on across runs, restoring its checkpoints from disk; a server
killed while ``ask`` streams its reply gives one line on stderr and exit status 1, keeps
the question, and the next run answers it once the server is back; an unreachable server
is one line naming it, quickly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from sessions.store import SessionStore

from .conftest import tiny_model
from .servers import REPO, free_port

pytestmark = [pytest.mark.rpc, pytest.mark.engine]


def command(endpoints, *argv: str) -> list[str]:
    return [sys.executable, "-m", "sessions.cli", "ask", "--rpc", ",".join(endpoints), "-ngl", "4",
            "-ts", "1,1", "-c", "2048", "-t", "1", "-m", str(tiny_model("llama")), "--temp", "0", *argv]


def ask(endpoints, *argv: str) -> tuple[str, dict]:
    done = subprocess.run(command(endpoints, "--stats", "--max-tokens", "12", *argv), cwd=REPO,
                          capture_output=True, text=True, env=os.environ.copy(), timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads(done.stderr.strip().splitlines()[-1])


def test_a_chat_over_two_servers_goes_on_across_runs(shared_pair):
    _, first = ask(shared_pair.endpoints, "Tell me about the sea.")
    assert first["tokens_evaluated"] > 0 and first["tokens_generated"] > 0
    _, second = ask(shared_pair.endpoints, "--session", str(first["session"]), "And the stars?")
    assert second["tokens_restored"] > 0  # the first run's checkpoints, from disk
    assert second["tokens_evaluated"] < second["tokens_restored"]


def test_a_server_killed_while_ask_streams(pair):
    a, b = pair.servers
    proc = subprocess.Popen(command(pair.endpoints, "--max-tokens", "1500", "Tell me about the sea."), cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    assert proc.stdout is not None
    shown = proc.stdout.read(20)  # the reply is streaming
    b.kill()
    out, err = proc.communicate(timeout=120)
    assert len(shown) == 20, err
    assert proc.returncode == 1
    assert err.startswith("llamachat: error: ") and err.count("\n") == 1, err
    assert b.endpoint in err and a.endpoint not in err and "dropped" in err
    with SessionStore.open() as store:
        (session,) = store.list_sessions()
        (question,) = store.messages(session.id)  # the question stays, the partial reply does not
        assert (question.role, question.text) == ("user", "Tell me about the sea.")
    b.restart()
    reply, stats = ask(pair.endpoints, "--session", str(session.id), "--trim")  # answers the waiting question
    assert reply.strip() and stats["parent"] == question.id


def test_an_unreachable_server_is_one_line_naming_it(shared_pair):
    nobody = f"127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    done = subprocess.run(command([shared_pair.endpoints[0], nobody], "hello"), cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - t0
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"RPC server {nobody} is unreachable" in done.stderr
    assert elapsed < 15, elapsed
