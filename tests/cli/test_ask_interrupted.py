"""``llamachat ask`` stopped from outside while it writes: Ctrl+C, SIGTERM, a reader gone.

Each is the same gesture as Esc in the app: the reply stops, the text written so far is
stored as a stopped reply, one line on stderr says so, and the exit status says what
stopped it (128 + the signal; 141 when the reader left). Real processes, real signals,
real pipes: the test reads the reply as it streams and acts once some of it is there;
its small pipe holds the process mid-reply until the test reads on (``tests.ask_process``).
"""

from __future__ import annotations

import os
import signal

import pytest

from sessions.stop_reason import StopReason
from sessions.store import SessionStore
from sessions.synth import make_model
from sessions.text_safety import inert
from tests.ask_process import HELD_REPLY_TOKENS, AskProcess, other_terminal, printed_some_reply

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def model() -> str:
    return str(make_model("llama", "tiny"))


def stored(session_id: int = 1):
    with SessionStore.open() as store:
        return store.messages(session_id)


def check_kept(process: AskProcess, words: str, *, read_all: bool = True) -> None:
    """One line on stderr; the question and the reply so far stored, the reply marked stopped."""
    question, reply = stored()
    assert question.text == "long one" and reply.parent_id == question.id
    assert reply.stats.stop_reason == StopReason.CANCELLED
    assert 0 < reply.stats.tokens_generated < HELD_REPLY_TOKENS
    printed = process.out.decode()
    if read_all:  # what was shown is what was kept
        assert printed.endswith("\n") and inert(reply.text) == printed[:-1]
    else:  # the reader saw the beginning
        assert inert(reply.text).startswith(printed)
    assert process.stderr_lines() == [
        f"llamachat: {words}: the reply so far is saved as stopped (message {reply.id}; "
        f"`llamachat ask --session 1 --continue {reply.id}` writes more)"]


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_after_text_was_printed_keeps_the_reply_as_stopped(model, signum, status):
    process = other_terminal(model, "long one")
    try:
        process.read_until(printed_some_reply, "the reply to stream")
        os.kill(process.pid, signum)
        assert process.drain() == status, process.stderr
    finally:
        process.kill()
    check_kept(process, f"stopped by {signal.Signals(signum).name}")


def test_a_reader_that_leaves_early_stops_the_reply_and_keeps_it(model):
    """``llamachat ask ... | head``: the reply was stored by no one before."""
    process = other_terminal(model, "long one")
    try:
        process.read_until(printed_some_reply, "the reply to stream")
        process.close_stdout()
        assert process.drain() == 141, process.stderr
    finally:
        process.kill()
    check_kept(process, "stopped: the output was closed by its reader", read_all=False)


def test_a_stopped_reply_can_be_continued(model):
    process = other_terminal(model, "long one")
    try:
        process.read_until(printed_some_reply, "the reply to stream")
        os.kill(process.pid, signal.SIGINT)
        assert process.drain() == 130
    finally:
        process.kill()
    reply = stored()[1]
    more = other_terminal(model, "--session", "1", "--continue", str(reply.id), "--max-tokens", "5")
    assert more.drain() == 0, more.stderr
    longer = stored()[-1]
    assert longer.parent_id == reply.parent_id and longer.text.startswith(reply.text) and longer.text != reply.text


def test_a_signal_while_waiting_for_another_reply_leaves_nothing(model):
    first = other_terminal(model, "long one")
    second = None
    try:
        first.read_until(printed_some_reply, "the first reply to stream")  # it holds the session's turn
        second = other_terminal(model, "--session", "1", "a queued question")
        second.read_until(lambda p: b"waiting" in p.err, "the second ask to wait", stream="err")
        os.kill(second.pid, signal.SIGINT)
        assert second.drain() == 130, second.stderr
        assert second.stderr_lines()[-1] == ("llamachat: stopped by SIGINT while waiting for another "
                                             "llamachat's reply: nothing was saved")
        assert first.drain() == 0, first.stderr
    finally:
        for process in (first, second):
            if process is not None:
                process.kill()
    assert "a queued question" not in [m.text for m in stored()]


def test_a_database_moved_away_while_the_reply_streams_is_said_in_one_line(model):
    """Another program moves the database aside mid-reply: nothing more is written to it,
    and the one line says the reply was not saved and why."""
    from sessions import paths

    process = other_terminal(model, "long one")
    try:
        process.read_until(printed_some_reply, "the reply to stream")
        db = paths.database_file()
        db.rename(db.with_name("moved-away.sqlite3"))
        assert process.drain() == 1
    finally:
        process.kill()
    [line] = process.stderr_lines()
    assert line.startswith("llamachat: error: the reply (") and "was not saved" in line
    assert "was replaced or moved by another program" in line
    assert not db.exists()  # no new database was started at the path either
