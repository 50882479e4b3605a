"""``llamachat serve`` as a real process on a free port, and OpenAI's client pointed at it.

Tests start ``python -m sessions.cli serve --port 0`` and wait for the line that says
where it listens (never for time), then drive it over HTTP. ``stop`` sends SIGTERM and
waits for the exit, as a service manager stops it; every test that restarts the server
between requests does it that way.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
LIMIT_SECONDS = 120.0
"""A server that never says it listens, or never ends, fails the test after this long."""


class ServeProcess:
    """One ``llamachat serve`` run."""

    def __init__(self, model: Path, *flags: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "sessions.cli", "serve", "-m", str(model), "--port", "0",
                                      *flags], cwd=REPO, env=env or os.environ.copy(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.err = b""
        self._wait_for(lambda: b"listening on http://" in self.err, "the server to listen")
        found = re.search(rb"listening on http://([^ ]+):(\d+) ", self.err)
        assert found is not None
        self.port = int(found.group(2))
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def stderr(self) -> str:
        return self.err.decode(errors="replace")

    def client(self, api_key: str = "none", **options: Any) -> Any:
        from openai import OpenAI

        return OpenAI(base_url=f"{self.url}/v1", api_key=api_key, max_retries=0, **options)

    def _wait_for(self, done: Any, what: str) -> None:
        deadline = time.monotonic() + LIMIT_SECONDS
        pipe = self.proc.stderr
        assert pipe is not None
        while not done():
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([pipe], [], [], left)[0]:
                self.proc.kill()
                raise AssertionError(f"timed out waiting for {what}; stderr: {self.stderr}")
            chunk = os.read(pipe.fileno(), 65536)
            if not chunk:
                raise AssertionError(f"the server ended before {what} (status {self.proc.wait()}); "
                                     f"stderr: {self.stderr}")
            self.err += chunk

    def wait_for_log(self, text: str) -> None:
        """Read the server's stderr until it holds ``text``."""
        self._wait_for(lambda: text.encode() in self.err, repr(text))

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send ``sig`` and wait for the server to end; its exit status, stderr read to the end."""
        self.proc.send_signal(sig)
        return self.wait()

    def wait(self) -> int:
        pipe = self.proc.stderr
        assert pipe is not None
        deadline = time.monotonic() + LIMIT_SECONDS
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([pipe], [], [], left)[0]:
                self.proc.kill()
                raise AssertionError(f"the server did not end; stderr: {self.stderr}")
            chunk = os.read(pipe.fileno(), 65536)
            if not chunk:
                break
            self.err += chunk
        return self.proc.wait(LIMIT_SECONDS)

    def __enter__(self) -> ServeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            status = self.stop()
            if exc[0] is None:
                assert status == 0, self.stderr
        else:
            self.proc.wait()
