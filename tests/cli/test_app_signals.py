"""The app asked to end from outside (SIGINT, SIGTERM, SIGHUP) while it writes a reply.

It must stop the reply and store it as stopped (as Esc does), put the terminal back
(main screen, mouse reporting off, cursor shown) and end with 128 + the signal. A real
``llamachat --demo`` in a pseudo-terminal (``tests.pty_app``): the test types a message,
reads the screen until the reply's first words appear, then sends the signal.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sessions.stop_reason import StopReason
from sessions.store import SessionStore
from tests.pty_app import PtyApp

pytestmark = pytest.mark.engine

QUESTION = "long one"
MAX_TOKENS = 3000
CONFIG = f"""n_ctx = 8192

[sampling]
temperature = 0.0
max_tokens = {MAX_TOKENS}
"""
ALT_SCREEN_ON, ALT_SCREEN_OFF = b"\x1b[?1049h", b"\x1b[?1049l"
PASTE_ON = b"\x1b[?2004h"
RESTORED = (ALT_SCREEN_OFF, b"\x1b[?1000l", b"\x1b[?1003l", b"\x1b[?1006l", b"\x1b[?25h")


@pytest.fixture(scope="module")
def demo_config(tmp_path_factory) -> Path:
    config = tmp_path_factory.mktemp("config") / "config.toml"
    config.write_text(CONFIG)
    return config


@pytest.fixture
def demo_env(demo_config) -> dict[str, str]:
    return dict(os.environ, LLAMACHAT_CONFIG=str(demo_config))


@pytest.fixture(scope="module")
def first_words(demo_config, tmp_path_factory) -> str:
    """A word the demo model's reply to the question starts with (it samples greedily, so
    the same word for every test here: asked once)."""
    env = dict(os.environ, LLAMACHAT_CONFIG=str(demo_config),
               LLAMACHAT_DATA_DIR=str(tmp_path_factory.mktemp("other-data")),
               LLAMACHAT_CACHE_DIR=str(tmp_path_factory.mktemp("other-cache")))
    done = subprocess.run([sys.executable, "-m", "sessions.cli", "--demo", "ask", "--max-tokens", "40", QUESTION],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return next(word for word in re.findall(r"[A-Za-z]{4,}", done.stdout))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_the_reply_keeps_it_and_restores_the_terminal(demo_env, first_words, signum):
    app = PtyApp("--demo", env=demo_env)
    try:
        app.read_until(lambda a: "Demo model" in a.text, "the app to start")
        app.type(QUESTION.encode() + b"\r")
        app.read_until(lambda a: first_words in a.text.rpartition(QUESTION)[2], "the reply to stream")
        app.signal(signum)
        assert app.wait() == 128 + signum, app.text[-2000:]
    finally:
        app.kill()
    assert ALT_SCREEN_ON in app.output
    left = app.after_last(ALT_SCREEN_ON)  # after the app last took the screen
    for sequence in RESTORED:
        assert sequence in left, f"{sequence!r} was not written on the way out"
    check_stopped_reply(first_words)


def test_a_terminal_that_goes_away_leaves_the_reply_stored(demo_env, first_words):
    app = PtyApp("--demo", env=demo_env)
    try:
        app.read_until(lambda a: "Demo model" in a.text, "the app to start")
        app.type(QUESTION.encode() + b"\r")
        app.read_until(lambda a: first_words in a.text.rpartition(QUESTION)[2], "the reply to stream")
        app.close_terminal()
        assert app.wait() == 128 + signal.SIGHUP
    finally:
        app.kill()
    check_stopped_reply(first_words)


def test_a_sigcont_the_app_did_not_stop_for_changes_nothing(demo_env, first_words):
    """The kernel sends SIGCONT with the SIGHUP of a hang-up. Textual's own handler takes
    any SIGCONT for a return from Ctrl+Z and takes the screen again with a second output
    thread (which a hang-up then kills, and shutdown waited on it for ever); the app's
    driver resumes only after it was suspended (``tui.terminal_driver``)."""
    app = PtyApp("--demo", env=demo_env)
    try:
        app.read_until(lambda a: "Demo model" in a.text, "the app to start")
        app.type(QUESTION.encode() + b"\r")
        app.read_until(lambda a: first_words in a.text.rpartition(QUESTION)[2], "the reply to stream")
        app.signal(signal.SIGCONT)
        streamed = len(app.output)
        app.read_until(lambda a: len(a.output) > streamed + 4000, "more of the reply after the SIGCONT")
        assert app.output.count(ALT_SCREEN_ON) == 1, "the app took the screen again"
        app.signal(signal.SIGTERM)
        assert app.wait() == 128 + signal.SIGTERM, app.text[-2000:]
    finally:
        app.kill()
    check_stopped_reply(first_words)


def test_after_a_stop_from_outside_sigcont_takes_the_screen_again(demo_env, first_words):
    """SIGTSTP (Ctrl+Z from a shell's job control) gives the terminal back; SIGCONT (``fg``)
    takes it again, and the app goes on: it reads keys and streams a reply."""
    app = PtyApp("--demo", env=demo_env)
    try:
        app.read_until(lambda a: "Demo model" in a.text, "the app to start")
        app.signal(signal.SIGTSTP)
        app.read_until(lambda a: ALT_SCREEN_OFF in a.output, "the app to give the screen back")
        app.wait_stopped()
        app.signal(signal.SIGCONT)
        app.read_until(lambda a: ALT_SCREEN_ON in a.after_last(ALT_SCREEN_OFF), "the app to take the screen again")
        # Keys typed before the terminal is raw again would meet the shell's line mode
        # (Enter arriving as a newline): the driver turns bracketed paste on after that.
        app.read_until(lambda a: PASTE_ON in a.after_last(ALT_SCREEN_ON), "the app to read keys again")
        app.type(QUESTION.encode() + b"\r")
        app.read_until(lambda a: first_words in a.text.rpartition(QUESTION)[2], "a reply after the return")
        app.signal(signal.SIGTERM)
        assert app.wait() == 128 + signal.SIGTERM, app.text[-2000:]
    finally:
        app.kill()
    check_stopped_reply(first_words)


def check_stopped_reply(first_words: str) -> None:
    with SessionStore.open() as store:
        question, reply = store.messages(1)
    assert question.text == QUESTION and reply.parent_id == question.id
    assert reply.stats.stop_reason == StopReason.CANCELLED
    assert 0 < reply.stats.tokens_generated < MAX_TOKENS
    assert first_words in reply.text
