"""Servers that lie in the RPC handshake: the probe bounds what it believes, and names them.

Each fake peer is a thread on loopback that speaks just enough of llama.cpp's RPC protocol
(HELLO, the device count, each device's memory) to tell one lie. It serves one client and
a bounded number of requests, so a probe that believed it would fail the test rather
than hang it.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from dataclasses import dataclass

import pytest

from sessions.rpc.probe import MAX_DEVICES, PROTO_MAJOR, PROTO_MINOR, probe
from sessions.rpc.report import server_lines
from tests.cli_support import run

REQUESTS = 10_000
"""The most questions a fake peer answers: a probe that asks more was fooled."""


@dataclass
class Lie:
    devices: int = 1
    free: int = 1 << 30
    total: int = 2 << 30
    pace: float = 0.0
    """Seconds between the bytes of every answer (a peer that dribbles)."""


class LyingServer:
    def __init__(self, lie: Lie) -> None:
        self.lie = lie
        self.requests = 0
        self.done = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.endpoint = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(10)
            try:
                while self.requests < REQUESTS and (header := self._read(conn, 9)):
                    cmd, size = struct.unpack("<BQ", header)
                    payload = self._read(conn, size) if size else b""
                    self.requests += 1
                    self._answer(conn, cmd, payload)
            except OSError:
                pass  # the probe gave up and closed the connection
        self.done.set()

    @staticmethod
    def _read(conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                return b""
            data += chunk
        return data

    def _answer(self, conn: socket.socket, cmd: int, payload: bytes) -> None:
        if cmd == 14:  # HELLO
            body = bytes([PROTO_MAJOR, PROTO_MINOR, 0, 0]) + bytes(24)
        elif cmd == 15:  # DEVICE_COUNT
            body = struct.pack("<I", self.lie.devices)
        else:  # GET_DEVICE_MEMORY
            body = struct.pack("<QQ", self.lie.free, self.lie.total)
        reply = struct.pack("<Q", len(body)) + body
        if not self.lie.pace:
            conn.sendall(reply)
            return
        paced = threading.Event()  # never set: waiting on it paces the bytes
        for byte in reply:
            conn.sendall(bytes([byte]))
            paced.wait(self.lie.pace)

    def close(self) -> None:
        self.sock.close()
        self.thread.join(10)


@pytest.fixture
def lying():
    servers: list[LyingServer] = []

    def make(**lie) -> LyingServer:
        servers.append(LyingServer(Lie(**lie)))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def test_an_honest_fake_passes(lying):
    server = lying(devices=2)
    info = probe(server.endpoint, timeout=2.0)
    assert len(info.devices) == 2 and info.devices[0].total_bytes == 2 << 30


def test_a_server_claiming_four_billion_devices_is_named_at_once(lying):
    server = lying(devices=0xFFFFFFFF)
    (line,) = server_lines([server.endpoint])
    assert line == (f"RPC server {server.endpoint} claims 4294967295 devices, more than the {MAX_DEVICES} any "
                    "machine holds: it is not a llama.cpp RPC server, or it is lying; it was not used")
    assert server.done.wait(10)
    assert server.requests == 2  # the handshake and the count: not one question per device


def test_a_server_claiming_absurd_memory_is_named(lying):
    server = lying(devices=3, total=1 << 63)
    (line,) = server_lines([server.endpoint])
    assert line.startswith(f"RPC server {server.endpoint} claims {1 << 63} bytes of memory on its device 0, ")
    assert line.endswith("it was not used") and "\n" not in line


def test_a_server_that_dribbles_is_cut_off_at_the_deadline(lying):
    server = lying(pace=0.05)  # every byte in time, the whole answer far too slow
    t0 = time.monotonic()
    (line,) = server_lines([server.endpoint], timeout=0.2)
    assert line.startswith(f"RPC server {server.endpoint} took more than 0.6 s to describe its devices")
    assert time.monotonic() - t0 < 5


def test_models_names_the_lying_server_in_one_line(lying, capsys):
    server = lying(devices=0xFFFFFFFF)
    code, _, err = run(capsys, "models", "--rpc", server.endpoint)
    assert code == 0
    lines = [line for line in err.splitlines() if server.endpoint in line]
    assert lines == [f"llamachat: RPC server {server.endpoint} claims 4294967295 devices, more than the "
                     f"{MAX_DEVICES} any machine holds: it is not a llama.cpp RPC server, or it is lying; "
                     "it was not used"]
