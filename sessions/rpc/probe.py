"""The first messages of llama.cpp's RPC protocol, spoken from Python with timeouts.

llama.cpp's own client connects without a timeout and calls ``GGML_ABORT`` when a server
refuses, answers wrongly or speaks another protocol version, which would end the whole
program. So every server is probed here first: a TCP connect with a timeout, the HELLO
handshake (version check), then the device count and each device's memory. A server
serves one client at a time, so one that accepts the connection but never answers the
HELLO is busy with another client (or is not an RPC server), and is reported as such.

A server is a peer on the network, not a part of this program: what it claims is bounded
before it is believed. Its device count decides how many questions follow (a server
claiming 2**32 devices would keep the probe asking for hours), its memory decides where
layers go, and a server that trickles its answers byte by byte could hold the probe for
ever with no single read timing out; so the count and the sizes are capped, and the whole
probe has a deadline. A server past any of them is named in one sentence.

The wire format (``ggml/src/ggml-rpc/ggml-rpc.cpp``, packed little-endian): a request is
``cmd:u8 | size:u64 | payload``, a reply ``size:u64 | payload``.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

from sessions.rpc.endpoints import split_endpoint
from sessions.rpc.errors import RpcError

PROTO_MAJOR, PROTO_MINOR = 7, 0
"""``RPC_PROTO_MAJOR_VERSION`` / ``MINOR`` of the vendored llama.cpp; the client accepts a
server with the same major and a minor no newer than its own."""
CMD_GET_DEVICE_MEMORY, CMD_HELLO, CMD_DEVICE_COUNT = 11, 14, 15
CONN_CAPS_SIZE = 24
TIMEOUT = 5.0
"""Seconds for the connect and for each answer: long enough for a slow link, short
enough that a mistyped address is an error before the user wonders."""
DEADLINE_FACTOR = 3
"""The whole probe of one server may take this many ``timeout``s: a handshake and one short
question per device are a few round trips, even over a slow link."""
MAX_DEVICES = 64
"""More devices than any one machine holds (llama.cpp's server exposes the devices it is
given with ``-d``, a few GPUs and a CPU); a larger count is not a real server's."""
MAX_DEVICE_BYTES = 1 << 50
"""1 PiB: far beyond the memory of any one device."""


@dataclass(frozen=True)
class RemoteDevice:
    free_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class ServerInfo:
    endpoint: str
    version: str
    devices: tuple[RemoteDevice, ...]

    def describe(self) -> str:
        gib = sum(d.total_bytes for d in self.devices) / (1 << 30)
        free = sum(d.free_bytes for d in self.devices) / (1 << 30)
        count = len(self.devices)
        return (f"{self.endpoint}: {count} device{'s' if count != 1 else ''}, "
                f"{free:.1f} GiB free of {gib:.1f} GiB (RPC v{self.version})")


class _Wire:
    def __init__(self, sock: socket.socket, endpoint: str, timeout: float):
        self.sock, self.endpoint, self.timeout = sock, endpoint, timeout
        self.limit = DEADLINE_FACTOR * timeout
        self.deadline = time.monotonic() + self.limit

    def call(self, cmd: int, payload: bytes, reply_size: int) -> bytes:
        self.sock.sendall(struct.pack("<BQ", cmd, len(payload)) + payload)
        (size,) = struct.unpack("<Q", self._read(8))
        if size != reply_size:
            raise RpcError(f"RPC server {self.endpoint} answered with {size} bytes where {reply_size} were "
                           "expected: it runs another llama.cpp version, or it is not an RPC server")
        return self._read(size)

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise self._too_slow()
            self.sock.settimeout(min(self.timeout, left))
            try:
                chunk = self.sock.recv(n - len(data))
            except TimeoutError:
                if time.monotonic() >= self.deadline:
                    raise self._too_slow() from None
                raise
            if not chunk:
                raise RpcError(f"RPC server {self.endpoint} closed the connection during the handshake "
                               "(another llama.cpp version, or not an RPC server)")
            data += chunk
        return data

    def _too_slow(self) -> RpcError:
        return RpcError(f"RPC server {self.endpoint} took more than {self.limit:g} s to describe its devices "
                        "(a few round trips for a real one): it is not a llama.cpp RPC server, or its link is too "
                        "slow to use")


def probe(endpoint: str, timeout: float = TIMEOUT) -> ServerInfo:
    """Handshake with ``endpoint`` and read its devices; ``RpcError`` naming it otherwise."""
    host, port = split_endpoint(endpoint)
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except TimeoutError:
        raise RpcError(f"RPC server {endpoint} is unreachable: no answer to the connection within "
                       f"{timeout:g} s (wrong address, or a firewall)") from None
    except OSError as error:
        why = error.strerror or str(error)
        raise RpcError(f"RPC server {endpoint} is unreachable: {why.lower()} "
                       f"(is `llamachat rpc-server` running there?)") from None
    with sock:
        wire = _Wire(sock, endpoint, timeout)
        try:
            hello = wire.call(CMD_HELLO, bytes(CONN_CAPS_SIZE), 4 + CONN_CAPS_SIZE)
            major, minor, patch = hello[0], hello[1], hello[2]
            if major != PROTO_MAJOR or minor > PROTO_MINOR:
                raise RpcError(f"RPC server {endpoint} speaks protocol {major}.{minor}.{patch}, this llamachat "
                               f"{PROTO_MAJOR}.{PROTO_MINOR}: install the same llama-cpp-python on both machines")
            (count,) = struct.unpack("<I", wire.call(CMD_DEVICE_COUNT, b"", 4))
            if count > MAX_DEVICES:
                raise RpcError(f"RPC server {endpoint} claims {count} devices, more than the {MAX_DEVICES} any "
                               "machine holds: it is not a llama.cpp RPC server, or it is lying; it was not used")
            devices = []
            for index in range(count):
                free, total = struct.unpack("<QQ", wire.call(CMD_GET_DEVICE_MEMORY, struct.pack("<I", index), 16))
                if max(free, total) > MAX_DEVICE_BYTES:
                    raise RpcError(f"RPC server {endpoint} claims {max(free, total)} bytes of memory on its device "
                                   f"{index}, more than any device holds (1 PiB): it is not a llama.cpp RPC server, "
                                   "or it is lying; it was not used")
                devices.append(RemoteDevice(free, total))
        except TimeoutError:
            raise RpcError(f"RPC server {endpoint} accepted the connection but did not answer within "
                           f"{timeout:g} s: it is serving another client (a server serves one at a time), "
                           "or it is not an RPC server") from None
        except OSError as error:
            raise RpcError(f"RPC server {endpoint} dropped the connection: {error.strerror or error}") from None
    if not devices:
        raise RpcError(f"RPC server {endpoint} has no devices")
    return ServerInfo(endpoint, f"{major}.{minor}.{patch}", tuple(devices))


def check_servers(endpoints: Sequence[str], timeout: float = TIMEOUT) -> list[ServerInfo]:
    """Probe every server in order; the first that fails raises (its message names it)."""
    return [probe(endpoint, timeout) for endpoint in endpoints]
