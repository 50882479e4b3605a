"""``llamachat rpc-server``: this machine's devices served to llamachat on another one.

ggml's server loop (``ggml_backend_rpc_start_server``) runs in a thread because it
never returns while it serves; the main thread waits for Ctrl+C. The loop has no stop
call, so the process ends with ``os._exit`` after saying so: the normal interpreter exit
would run C++ static destructors under the thread still inside ``accept()``.

The server is reported as listening only once a HELLO sent to it is answered, so a
script (or a test) can wait for that line instead of guessing, and a port that is taken
is an error, not a silent exit.
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
import time
from typing import TextIO

from sessions.rpc.backend import require_rpc, serving_devices, start_server
from sessions.rpc.errors import RpcError
from sessions.rpc.probe import probe

WARNING = """\
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!
WARNING: Host ('{host}') is != '127.0.0.1'
         Never expose the RPC server to an open network!
         This is an experimental feature and is not secure!
!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"""
"""llama.cpp's own warning (``tools/rpc/rpc-server.cpp``), printed for any other address."""
NOTICE = ("the RPC protocol has no authentication: anyone who can reach {endpoint} can use this machine's "
          "devices and memory; never expose it to an untrusted network")
READY_TIMEOUT = 30.0


def _flush_c_stdio() -> None:
    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


def _wait_until_listening(endpoint: str, probe_endpoint: str, stopped: threading.Event) -> None:
    """Return once the server answers a HELLO; ``RpcError`` if its thread ended first.

    ggml binds the socket without telling anyone, so the only way to know is to ask.
    """
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        if stopped.is_set():
            raise RpcError(f"could not listen on {endpoint}: the port is in use, or the address is not "
                           "one of this machine's")
        try:
            probe(probe_endpoint, timeout=2.0)
            return
        except RpcError:
            if time.monotonic() > deadline:
                raise RpcError(f"the RPC server on {endpoint} did not start within {READY_TIMEOUT:g} s") from None
            stopped.wait(0.02)


def _check_free(host: str, port: int) -> None:
    """Bind the address once as ggml will (SO_REUSEADDR), so a taken port is named now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as error:
            raise RpcError(f"cannot listen on {host}:{port}: {(error.strerror or str(error)).lower()}") from None


def serve(host: str, port: int, threads: int, cache_dir: str | None, out: TextIO, err: TextIO) -> int:
    """Serve until Ctrl+C (never returns then: see the module docstring), or fail with RpcError."""
    require_rpc()
    _check_free(host, port)
    endpoint = f"{host}:{port}"
    if host != "127.0.0.1":
        print("\n" + WARNING.format(host=host) + "\n", file=err, flush=True)
    print(f"llamachat: warning: {NOTICE.format(endpoint=endpoint)}", file=err, flush=True)
    devices = serving_devices()
    stopped = threading.Event()

    def run() -> None:
        try:
            start_server(endpoint, cache_dir, threads, devices)
        finally:
            stopped.set()

    threading.Thread(target=run, name="rpc-server", daemon=True).start()
    probe_host = "127.0.0.1" if host in ("0.0.0.0", "") else host
    try:
        _wait_until_listening(endpoint, f"{probe_host}:{port}", stopped)
        print(f"llamachat: rpc-server listening on {endpoint} with {threads} CPU threads; Ctrl+C stops it",
              file=out, flush=True)
        stopped.wait()  # Ctrl+C interrupts it
    except KeyboardInterrupt:
        print(f"\nllamachat: rpc-server on {endpoint} stopped", file=out, flush=True)
        _flush_c_stdio()
        os._exit(0)
    raise RpcError(f"the RPC server on {endpoint} stopped: it could not accept a connection")

