"""The real ``llamachat`` app in a pseudo-terminal, read as a terminal would.

``PtyApp`` starts the console script (``llamachat``) under ``pty.fork``, so the app runs
exactly as in a terminal: raw mode, the alternate screen, mouse reporting. The test reads
everything the app writes (``read_until``: until a condition holds, never for a time),
types into it, sends it signals, and looks at the terminal sequences it left behind.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shutil
import struct
import sys
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

LIMIT_SECONDS = 120.0
ESCAPES = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]")


def llamachat_command() -> list[str]:
    script = Path(sys.executable).with_name("llamachat")
    if script.is_file():
        return [str(script)]
    found = shutil.which("llamachat")
    return [found] if found else [sys.executable, "-c", "import sys; from tui.entry import main; sys.exit(main())"]


class PtyApp:
    def __init__(self, *argv: str, env: dict[str, str], size: tuple[int, int] = (100, 30)) -> None:
        command = [*llamachat_command(), *argv]
        pid, fd = pty.fork()
        if pid == 0:  # the child: the app, with the pty as its terminal
            os.execve(command[0] if os.path.isabs(command[0]) else shutil.which(command[0]) or command[0],
                      command, {**env, "TERM": "xterm-256color"})
        self.pid, self.fd = pid, fd
        columns, rows = size
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.output = b""
        self.status: int | None = None
        self.closed = False

    @property
    def text(self) -> str:
        """What was written, without the escape sequences."""
        return ESCAPES.sub(b"", self.output).decode(errors="replace")

    def read_until(self, done: Callable[[PtyApp], bool], what: str) -> None:
        deadline = time.monotonic() + LIMIT_SECONDS
        while not done(self):
            if not self._read_some(deadline):
                raise AssertionError(f"the app ended before {what}; it wrote: {self.text[-2000:]!r}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the app wrote: {self.text[-2000:]!r}")

    def type(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def signal(self, number: int) -> None:
        os.kill(self.pid, number)

    def wait_stopped(self) -> None:
        """Wait until the app's process is stopped, as a shell's job control does before
        it can ``fg`` it: a SIGCONT sent sooner would come before the app stops itself."""
        status: list[int] = []

        def wait() -> None:
            try:
                status.append(os.waitpid(self.pid, os.WUNTRACED)[1])
            except ChildProcessError:  # reaped by ``kill`` after the time ran out
                pass

        waiter = threading.Thread(target=wait, daemon=True)
        waiter.start()
        waiter.join(LIMIT_SECONDS)
        if not status:
            self.kill()  # which also ends the waiting thread
            raise AssertionError("the app did not stop")
        if not os.WIFSTOPPED(status[0]):
            self.status = os.waitstatus_to_exitcode(status[0])
            raise AssertionError(f"the app ended ({self.status}) instead of stopping")

    def close_terminal(self) -> None:
        """The terminal window goes away: the kernel hangs up the app (SIGHUP)."""
        os.close(self.fd)
        self.closed = True

    def wait(self) -> int:
        """Read until the app has closed the terminal; its exit status (128 + N for signal N)."""
        deadline = time.monotonic() + LIMIT_SECONDS
        while not self.closed and self._read_some(deadline):
            if time.monotonic() > deadline:
                self.kill()
                raise AssertionError("the app did not end")
        if not self._ends_by(deadline):
            self.kill()
            raise AssertionError("the app did not end after its terminal closed")
        _, status = os.waitpid(self.pid, 0)
        self.status = os.waitstatus_to_exitcode(status)
        return self.status

    def _ends_by(self, deadline: float) -> bool:
        """Whether the app's process ends by ``deadline`` (waited on through a pidfd where
        the system has them, so that a hung app fails the test instead of hanging it)."""
        if not hasattr(os, "pidfd_open"):
            return True  # waitpid then waits as long as it takes
        pidfd = os.pidfd_open(self.pid)
        try:
            return bool(select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))[0])
        finally:
            os.close(pidfd)

    def _read_some(self, deadline: float) -> bool:
        """Read what is there (waiting until ``deadline``); False once the terminal is closed."""
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([self.fd], [], [], left)[0]:
            return True
        try:
            chunk = os.read(self.fd, 65536)
        except OSError:  # EIO: every process on the terminal has ended
            return False
        self.output += chunk
        return bool(chunk)

    def after_last(self, sequence: bytes) -> bytes:
        """What was written after the last ``sequence`` (everything if it never came)."""
        return self.output.rpartition(sequence)[2]

    def kill(self) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, 9)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        if not self.closed:
            os.close(self.fd)
            self.closed = True
