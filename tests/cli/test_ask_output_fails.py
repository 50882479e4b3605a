"""``llamachat ask`` whose stdout fails otherwise than by its reader leaving.

A terminal closed under it (the kernel hangs it up: SIGHUP, then EIO on every write), a
terminal gone without a hang-up (EIO alone), a full disk (``> /dev/full``: ENOSPC) and
no stdout at all (``>&-``): each stops the reply as Esc does, keeps the text written so
far as a stopped reply, and says in one line what failed and what was kept. A signal
gives 128 + its number; a failed write alone gives 1. Real processes, a real pty.
"""

from __future__ import annotations

import os
import pty
import select
import shlex
import signal
import subprocess
import sys
import time

import pytest

from sessions.stop_reason import StopReason
from sessions.store import SessionStore
from sessions.synth import make_model
from tests.ask_process import LIMIT_SECONDS, REPO

pytestmark = pytest.mark.engine

MAX_TOKENS = 1500
KEPT = ": the reply so far is saved as stopped (message 2; `llamachat ask --session 1 --continue 2` writes more)"


@pytest.fixture(scope="module")
def model() -> str:
    return str(make_model("llama", "tiny"))


def ask_argv(model: str) -> list[str]:
    return [sys.executable, "-m", "sessions.cli", "ask", "-m", model, "--temp", "0",
            "--max-tokens", str(MAX_TOKENS), "long one"]


def check_kept() -> None:
    with SessionStore.open() as store:
        question, reply = store.messages(1)
    assert question.text == "long one" and reply.parent_id == question.id
    assert reply.stats.stop_reason == StopReason.CANCELLED
    assert 0 < reply.stats.tokens_generated < MAX_TOKENS


def read_terminal(fd: int, enough: int) -> None:
    """Read the terminal until ``enough`` bytes of the reply came, as a person watching it."""
    seen = b""
    deadline = time.monotonic() + LIMIT_SECONDS
    while len(seen.strip()) < enough:
        assert select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0], "no reply came"
        seen += os.read(fd, 65536)


def finish(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        _, err = proc.communicate(timeout=LIMIT_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err.decode(errors="replace")


def hang_up(model: str, *, stderr_on_the_terminal: bool) -> tuple[int, bytes]:
    """Run ``ask`` in a terminal of its own (its controlling terminal) and close that
    terminal once the reply shows; its exit status and what it wrote to stderr, when
    stderr went to a pipe. Closing it sends SIGHUP and fails every later write with EIO."""
    read_end, write_end = os.pipe()
    pid, fd = pty.fork()
    if pid == 0:
        if not stderr_on_the_terminal:
            os.dup2(write_end, 2)
        os.chdir(REPO)
        os.execv(sys.executable, ask_argv(model))
    os.close(write_end)
    err = b""
    try:
        read_terminal(fd, 8)
        os.close(fd)
        fd = -1
        deadline = time.monotonic() + LIMIT_SECONDS
        while select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))[0]:
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            err += chunk
        pidfd = os.pidfd_open(pid)
        try:
            assert select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))[0], "ask did not end"
        finally:
            os.close(pidfd)
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), err
    finally:
        if fd >= 0:
            os.close(fd)
        os.close(read_end)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def test_closing_the_terminal_it_runs_in_keeps_the_reply(model):
    status, err = hang_up(model, stderr_on_the_terminal=False)
    assert status == 128 + signal.SIGHUP, err
    assert err.decode().splitlines()[-1] == f"llamachat: stopped by SIGHUP{KEPT}"
    check_kept()


def test_a_terminal_closed_under_both_outputs_still_keeps_the_reply(model):
    """stderr is on the closed terminal too: the line saying what was kept cannot be
    written, and that is no reason to end otherwise."""
    status, _ = hang_up(model, stderr_on_the_terminal=True)
    assert status == 128 + signal.SIGHUP
    check_kept()


def test_a_terminal_gone_without_a_hang_up_keeps_the_reply(model):
    """The pty is not the process's controlling terminal (as under ``nohup`` or a shell that
    ignores HUP): no signal comes, only EIO."""
    main, other = os.openpty()
    proc = subprocess.Popen(ask_argv(model), cwd=REPO, stdin=subprocess.DEVNULL, stdout=other,
                            stderr=subprocess.PIPE, start_new_session=True)
    os.close(other)
    try:
        read_terminal(main, 8)
    finally:
        os.close(main)
    status, err = finish(proc)
    assert status == 1, err
    assert err.splitlines() == [
        f"llamachat: stopped: the reply could not be written to stdout (Input/output error){KEPT}"]
    check_kept()


def test_stdout_on_a_full_disk_keeps_the_reply_and_blames_stdout(model):
    with open("/dev/full", "wb") as full:
        proc = subprocess.Popen(ask_argv(model), cwd=REPO, stdin=subprocess.DEVNULL, stdout=full,
                                stderr=subprocess.PIPE)
    status, err = finish(proc)
    assert status == 1, err
    assert err.splitlines() == [
        f"llamachat: stopped: the reply could not be written to stdout (No space left on device){KEPT}"]
    check_kept()


def test_stdout_closed_keeps_the_reply(model):
    command = shlex.join(ask_argv(model)) + " >&-"
    proc = subprocess.Popen(["sh", "-c", command], cwd=REPO, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    status, err = finish(proc)
    assert status == 1, err
    assert err.splitlines() == [f"llamachat: stopped: the reply could not be written to stdout (it is closed){KEPT}"]
    check_kept()
