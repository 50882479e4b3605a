"""``llamachat ask`` as a real process, read as it streams.

Tests of several processes, signals and closed pipes start ``python -m sessions.cli ask``
and synchronise on what it prints, never on time: ``read_until`` reads its stdout (or
stderr) until a condition holds. Its stdout pipe is made as small as the system allows,
so a test that stops reading holds the process in the middle of its reply (its next write
blocks) for as long as it likes; ``drain`` lets it go on.
"""

from __future__ import annotations

import fcntl
import os
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LIMIT_SECONDS = 120.0
"""A process that never prints what a test waits for fails the test after this long."""


class AskProcess:
    """One ``llamachat ask`` run, with what it printed so far."""

    def __init__(self, *argv: str, env: dict[str, str] | None = None, stdin: int | None = subprocess.DEVNULL,
                 runner: str = "sessions.cli"):
        """``runner`` is the module run with ``ask`` and ``argv`` (a test's wrapper of the CLI)."""
        self.proc = subprocess.Popen([sys.executable, "-m", runner, "ask", *argv], cwd=REPO,
                                     env=env or os.environ.copy(), stdin=stdin, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        fcntl.fcntl(self.proc.stdout.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), 4096)
        self.out = b""
        self.err = b""

    @property
    def pid(self) -> int:
        return self.proc.pid

    def read_until(self, done: Callable[[AskProcess], bool], what: str, *, stream: str = "out") -> None:
        """Read ``stream`` (out or err) until ``done(self)``; fails if the process ends first."""
        pipe = self.proc.stdout if stream == "out" else self.proc.stderr
        deadline = time.monotonic() + LIMIT_SECONDS
        while not done(self):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([pipe], [], [], left)[0]:
                raise AssertionError(f"timed out waiting for {what}; stderr so far: {self.stderr}")
            chunk = os.read(pipe.fileno(), 65536)
            if not chunk:
                raise AssertionError(f"the process ended before {what} (status {self.proc.wait()}); "
                                     f"stderr: {self.stderr}")
            if stream == "out":
                self.out += chunk
            else:
                self.err += chunk

    def close_stdout(self) -> None:
        """Stop reading its output for good, as ``head`` does once it has enough."""
        self.proc.stdout.close()

    def drain(self) -> int:
        """Read everything left until the process ends; returns its exit status."""
        pipes = [(self.proc.stdout, "out"), (self.proc.stderr, "err")]
        streams = {pipe.fileno(): name for pipe, name in pipes if not pipe.closed}
        deadline = time.monotonic() + LIMIT_SECONDS
        while streams:
            left = deadline - time.monotonic()
            ready = select.select(list(streams), [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                self.proc.kill()
                raise AssertionError("the process did not finish in time")
            for fd in ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    del streams[fd]
                elif streams[fd] == "out":
                    self.out += chunk
                else:
                    self.err += chunk
        status = self.proc.wait(timeout=LIMIT_SECONDS)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return status

    def stderr_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line]

    @property
    def stderr(self) -> str:
        return self.err.decode(errors="replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if not pipe.closed:
                pipe.close()


HELD_REPLY_TOKENS = 1500
"""The tiny llama's reply this long (about 6.6 KB) outgrows the stdout pipe: a test that stops
reading holds the process mid-reply."""
SHORT_REPLY_TOKENS = 24
"""A reply another terminal writes to the end while no test holds it: only its place counts."""


def other_terminal(model: str, *argv: str, max_tokens: int = HELD_REPLY_TOKENS,
                   env: dict[str, str] | None = None) -> AskProcess:
    """``llamachat ask`` at temperature 0 as another terminal runs it: ``-m model ARGV``."""
    return AskProcess("-m", model, "--temp", "0", "--max-tokens", str(max_tokens), *argv, env=env)


def other_terminal_asked(model: str, *argv: str) -> str:
    """A short ask of another terminal, run to its end; what it printed."""
    process = other_terminal(model, *argv, max_tokens=SHORT_REPLY_TOKENS)
    status = process.drain()
    assert status == 0, process.stderr
    return process.out.decode()


def printed_some_reply(process: AskProcess) -> bool:
    return len(process.out.strip()) >= 8
