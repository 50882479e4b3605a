"""``llamachat rpc-server`` processes on loopback for the tests: start, wait, kill, restart.

Each server is a real process started from this checkout. Starting waits for the line the
command prints once a HELLO sent to the new server has been answered (no sleeping); a
thread then keeps reading its output so it can never block on a full pipe.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RpcServer:
    """One ``llamachat rpc-server --port P -t 1`` process."""

    def __init__(self, port: int | None = None, host: str = "127.0.0.1"):
        self.host = host
        self.port = port or free_port()
        self.endpoint = f"{host}:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.output: list[str] = []
        self._drainer: threading.Thread | None = None

    def start(self) -> RpcServer:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sessions.cli", "rpc-server", "--host", self.host, "--port", str(self.port),
             "-t", "1"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # ends when the line comes, or when the process exits
            self.output.append(line)
            if "rpc-server listening on" in line:
                break
        else:
            raise RuntimeError(f"rpc-server on port {self.port} did not start: {''.join(self.output)}")
        self._drainer = threading.Thread(target=self._drain, args=(self.proc.stdout,), daemon=True)
        self._drainer.start()
        return self

    def _drain(self, stream) -> None:
        for line in stream:
            self.output.append(line)

    def kill(self) -> None:
        """SIGKILL, as when the machine is switched off; returns once the process is gone
        and ``output`` holds everything it wrote."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()
        if self._drainer is not None:
            self._drainer.join(timeout=30)  # the pipe ends once the process has exited

    def pause(self) -> None:
        """SIGSTOP: the server keeps its connections but answers nothing (a hung machine)."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def restart(self) -> RpcServer:
        self.kill()
        return self.start()


class ServerPair:
    """Two servers, started together, stopped together."""

    def __init__(self) -> None:
        self.servers = [RpcServer().start(), RpcServer().start()]

    @property
    def endpoints(self) -> tuple[str, ...]:
        return tuple(s.endpoint for s in self.servers)

    def close(self) -> None:
        for server in self.servers:
            server.resume()
            server.kill()
