"""``ask --regenerate MSG -n N``: N new versions of a reply at once, in a new process: the
question's state restored once, nothing of it evaluated, the versions sampled in one batch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from sessions.stop_reason import StopReason
from sessions.store import SessionStore
from sessions.synth import make_model
from tests.ask_process import AskProcess
from tests.cli_support import assert_one_line_error

pytestmark = pytest.mark.engine


def ask(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sessions.cli", "ask", "--max-tokens", "6", *argv],
                          capture_output=True, text=True, env=os.environ.copy(), timeout=120)


def stats_lines(stderr: str) -> list[dict]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def first_reply() -> tuple[str, dict]:
    """The tiny llama's path, and the stats of a first question answered in a new chat."""
    model = str(make_model("llama", "tiny"))
    first = ask("-m", model, "--temp", "0", "--stats", "Tell me about the sea.")
    assert first.returncode == 0, first.stderr
    [asked] = stats_lines(first.stderr)
    return model, asked


def test_three_versions_in_a_new_process_in_one_batch_each_a_sibling_with_nothing_evaluated():
    model, asked = first_reply()
    more = ask("-m", model, "--session", str(asked["session"]), "--regenerate", str(asked["message"]),
               "-n", "3", "--temp", "0.9", "--seed", "5", "--stats")
    assert more.returncode == 0, more.stderr
    versions = stats_lines(more.stderr)
    assert len(versions) == 3 and len({v["message"] for v in versions}) == 3
    assert all(v["parent"] == asked["parent"] for v in versions)  # siblings of the first reply
    assert all(v["tokens_evaluated"] == 0 for v in versions)  # the question's state, restored once
    with SessionStore.open() as store:
        stored = [store.get_message(v["message"]) for v in versions]
        assert len(store.load_tree(asked["session"]).children(asked["parent"])) == 4  # the first reply and 3 more
    assert [(m.stats.seed, m.stats.batch) for m in stored] == [(5, 3), (6, 3), (7, 3)]
    shown = more.stdout.split("\n\n")
    assert [part.strip() for part in shown] == [m.text.strip() for m in stored]  # in order, a blank line apart


def test_versions_at_temperature_0_are_refused_in_one_line_and_nothing_is_written():
    model, asked = first_reply()
    done = ask("-m", model, "--session", str(asked["session"]), "--regenerate", str(asked["message"]),
               "-n", "3", "--temp", "0")
    assert_one_line_error(done.returncode, done.stdout, done.stderr, "every version would be the same reply")
    with SessionStore.open() as store:
        assert len(store.load_tree(asked["session"]).children(asked["parent"])) == 1
        assert store.get_session(asked["session"]).active_leaf_id == asked["message"]  # the reply still shown


def test_versions_need_a_reply_to_regenerate_and_a_count_in_range():
    model = str(make_model("llama", "tiny"))
    done = ask("-m", model, "-n", "2", "Hello")
    assert_one_line_error(done.returncode, done.stdout, done.stderr, "-n/--versions needs --regenerate")
    done = ask("-m", model, "-n", "20", "Hello")
    assert_one_line_error(done.returncode, done.stdout, done.stderr, "from 1 to 8")


def test_a_signal_while_the_versions_are_written_keeps_each_as_stopped():
    model, asked = first_reply()
    process = AskProcess("-m", model, "--session", str(asked["session"]), "--regenerate", str(asked["message"]),
                         "-n", "3", "--temp", "0.9", "--seed", "3", "--max-tokens", "1500")
    try:
        process.read_until(lambda p: len(p.out.strip()) >= 8, "the first version streaming")
        os.kill(process.pid, signal.SIGINT)
        assert process.drain() == 130, process.stderr
    finally:
        process.kill()
    with SessionStore.open() as store:
        versions = store.load_tree(asked["session"]).children(asked["parent"])[1:]
    assert len(versions) == 3 and all(v.stats.batch == 3 for v in versions)
    assert all(v.stats.stop_reason == StopReason.CANCELLED and v.text for v in versions)  # each kept as stopped
    assert process.out.decode().split("\n\n")[0].strip() == versions[0].text.strip()
    ids = ", ".join(str(v.id) for v in versions)
    assert process.stderr_lines()[-1] == (
        f"llamachat: stopped by SIGINT: the 3 versions so far are saved as stopped (messages {ids}; "
        f"`llamachat ask --session {asked['session']} --continue MSG` writes more of one)")
