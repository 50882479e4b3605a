"""One ``llamachat ask`` run with one fault injected at a chosen point of its reply.

The faults are the real ones: a pty whose master is closed (the process's controlling
terminal, under stdout alone or under stderr too: the kernel sends SIGHUP, then every
write fails with EIO), a pty closed that
is not its controlling terminal (EIO alone), stdout on ``/dev/full``, stdout closed
(``>&-``), a reader that leaves, and SIGINT, SIGTERM or SIGHUP sent by another process.
Those that wait for part of the reply read ``after`` bytes of it first; nothing here
sleeps: every wait is a ``select`` on the process's output or its pidfd, with a deadline,
and a process still there at the deadline is killed and reported as hung.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 120.0
"""Far more than any run takes on a loaded machine; past it the process is a hang."""

SIGNALS = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM, "sighup": signal.SIGHUP}
OUTPUT_FAULTS = ("hangup", "hangup-both", "eio", "full", "closed", "pipe")
ASK_FAULTS = (*OUTPUT_FAULTS, *SIGNALS)
STATUS = {"hangup": 128 + signal.SIGHUP, "hangup-both": 128 + signal.SIGHUP,
          "eio": 1, "full": 1, "closed": 1, "pipe": 128 + signal.SIGPIPE,
          **{name: 128 + number for name, number in SIGNALS.items()}}
"""The exit status each fault must give when it stops the reply, as a shell reports it."""


@dataclass
class FaultRun:
    status: int
    """Exit status as a shell reports it (128 + N for a process a signal ended)."""
    printed: int
    """Bytes of the reply this side read before the fault."""
    stderr: str
    hung: bool = False
    ended_first: bool = False
    """The process had ended before the fault came (the reply was shorter than ``after``)."""
    stderr_seen: bool = True
    """False when stderr went to the terminal that was closed: what it said is gone."""


def run_with_fault(fault: str | None, argv: Sequence[str], env: Mapping[str, str], after: int = 0) -> FaultRun:
    """``python -m sessions.cli ARGV`` with ``fault`` once ``after`` bytes of the reply came
    (``None``: no fault, stdout read to its end)."""
    command = [sys.executable, "-m", "sessions.cli", *argv]
    if fault is None:
        return _through_pipe(fault, command, env, sys.maxsize)
    if fault in ("hangup", "hangup-both"):
        return _hang_up(command, env, after, stderr_on_the_terminal=fault == "hangup-both")
    if fault == "eio":
        return _terminal_gone(command, env, after)
    if fault == "full":
        with open("/dev/full", "wb") as full:
            return _finish(_popen(command, env, stdout=full), printed=0)
    if fault == "closed":
        shell = ["sh", "-c", 'exec "$@" >&-', "sh", *command]
        return _finish(_popen(shell, env, stdout=subprocess.DEVNULL), printed=0)
    return _through_pipe(fault, command, env, after)


def _popen(command: Sequence[str], env: Mapping[str, str], **kwargs) -> subprocess.Popen:
    return subprocess.Popen(list(command), cwd=REPO, env=dict(env), stdin=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, **kwargs)


def _finish(proc: subprocess.Popen, printed: int, ended_first: bool = False) -> FaultRun:
    """Wait for the process with the deadline; what it wrote to stderr."""
    try:
        _, err = proc.communicate(timeout=DEADLINE)
        hung = False
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        hung = True
    status = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    return FaultRun(status, printed, err.decode(errors="replace"), hung, ended_first)


def _read_some(fd: int, after: int) -> tuple[int, bool]:
    """Read from ``fd`` until ``after`` bytes came or it ends; (bytes read, it ended)."""
    seen = 0
    deadline = time.monotonic() + DEADLINE
    while seen < after:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return seen, False  # the caller's fault and deadline deal with it
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # a pty whose other side closed reads EIO, not end of file
            chunk = b""
        if not chunk:
            return seen, True
        seen += len(chunk)
    return seen, False


def _through_pipe(fault: str | None, command: Sequence[str], env: Mapping[str, str], after: int) -> FaultRun:
    """A pipe as small as the system allows: while this side does not read, the process
    waits in the middle of its reply, so the fault lands there."""
    proc = _popen(command, env, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    fcntl.fcntl(proc.stdout.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)
    printed, ended = _read_some(proc.stdout.fileno(), after)
    if fault == "pipe":
        proc.stdout.close()
    elif fault is None:
        proc.stdout.close()
    else:
        proc.send_signal(SIGNALS[fault])  # a process that ended and is not reaped yet ignores it
        _read_some(proc.stdout.fileno(), sys.maxsize)  # read on: the rest of the reply, up to the stop
        proc.stdout.close()
    return _finish(proc, printed, ended)


def _terminal_gone(command: Sequence[str], env: Mapping[str, str], after: int) -> FaultRun:
    """A pty that is not the process's controlling terminal (a new session without one):
    closing it gives EIO and no signal, as under ``nohup``."""
    main, other = os.openpty()
    proc = _popen(command, env, stdout=other, start_new_session=True)
    os.close(other)
    try:
        printed, ended = _read_some(main, after)
    finally:
        os.close(main)
    return _finish(proc, printed, ended)


def _hang_up(command: Sequence[str], env: Mapping[str, str], after: int, stderr_on_the_terminal: bool) -> FaultRun:
    """The process in a terminal of its own, closed after ``after`` bytes: SIGHUP and EIO.
    stderr goes to a pipe, so the line it leaves can be read, or to the terminal too (both
    outputs fail then, and what it says is lost with the terminal)."""
    read_end, write_end = os.pipe()
    pid, fd = pty.fork()
    if pid == 0:  # the child: only exec (or leave) from here
        try:
            if not stderr_on_the_terminal:
                os.dup2(write_end, 2)
            os.chdir(REPO)
            os.execve(command[0], list(command), dict(env))
        finally:
            os._exit(127)
    os.close(write_end)
    pidfd = os.pidfd_open(pid)
    err, hung = b"", False
    try:
        printed, ended = _read_some(fd, after)
        os.close(fd)
        fd = -1
        deadline = time.monotonic() + DEADLINE
        while select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))[0]:
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            err += chunk
        hung = not select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))[0]
        if hung:
            os.kill(pid, signal.SIGKILL)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    finally:
        if fd >= 0:
            os.close(fd)
        os.close(read_end)
        os.close(pidfd)
    return FaultRun(status if status >= 0 else 128 - status, printed, err.decode(errors="replace"), hung, ended,
                    stderr_seen=not stderr_on_the_terminal)
