"""llama.cpp's RPC backend through ggml's registry: add servers, and serve this machine's devices.

Adding servers follows ``add_rpc_devices`` in llama.cpp's ``common/arg.cpp``: find the
"RPC" backend, ask it for ``ggml_backend_rpc_add_server``, call that per endpoint and
register the backend it returns; every model loaded afterwards in this process sees the
servers' devices (placed before local GPUs), and ``n_gpu_layers`` spreads layers over
them. A server added once stays for the life of the process (ggml has no removal), so
the app runs RPC models in a child process (``sessions.engine.process``). The registry's
devices, the servers' among them, are listed by ``sessions.llama.devices``.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence

from sessions.llama.native import ggml
from sessions.rpc.errors import REBUILD, RpcError
from sessions.rpc.probe import ServerInfo, check_servers

_added: set[str] = set()
_lock = threading.Lock()


def rpc_compiled_in() -> bool:
    """Whether this llama-cpp-python build contains the RPC backend (``-DGGML_RPC=on``)."""
    return bool(ggml().reg_by_name(b"RPC"))


def require_rpc() -> int:
    """The RPC backend's registry handle, or ``RpcError`` saying how to rebuild."""
    reg = ggml().reg_by_name(b"RPC")
    if not reg:
        raise RpcError(f"this llama-cpp-python was built without the RPC backend; rebuild it with: {REBUILD}")
    return reg


def _proc(reg: int, name: str, prototype):
    address = ggml().reg_get_proc_address(reg, name.encode())
    if not address:
        raise RpcError(f"the RPC backend of this llama.cpp has no {name}; rebuild it with: {REBUILD}")
    return prototype(address)


def add_servers(endpoints: Sequence[str]) -> list[ServerInfo]:
    """Probe every server (a clear error naming the first bad one), then register them all."""
    reg = require_rpc()
    infos = check_servers(endpoints)
    add = _proc(reg, "ggml_backend_rpc_add_server", ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p))
    g = ggml()
    with _lock:
        for endpoint in endpoints:
            if endpoint in _added:
                continue
            server_reg = add(endpoint.encode())
            if not server_reg:
                raise RpcError(f"RPC server {endpoint} reported no devices")
            g.register(server_reg)
            _added.add(endpoint)
    return infos


def serving_devices() -> list[int]:
    """What ``rpc-server`` exposes by default: every GPU-like device, else the CPU.

    The same choice as llama.cpp's ``tools/rpc/rpc-server.cpp``.
    """
    g = ggml()
    g.load_all()
    handles = [g.dev_get(i) for i in range(g.dev_count())]
    accelerated = [d for d in handles if g.dev_type(d) not in (0, 3) and not (g.dev_name(d) or b"").startswith(b"RPC")]
    return accelerated or [d for d in handles if g.dev_type(d) == 0][:1]


def start_server(endpoint: str, cache_dir: str | None, threads: int, device_handles: Sequence[int]) -> None:
    """Serve ``device_handles`` on ``endpoint``; blocks for as long as the server runs.

    ggml's loop has no stop call: it returns only when it cannot listen (the port is taken,
    the address is not local) or accept.
    """
    reg = require_rpc()
    start = _proc(reg, "ggml_backend_rpc_start_server", ctypes.CFUNCTYPE(
        None, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)))
    array = (ctypes.c_void_p * len(device_handles))(*device_handles)
    start(endpoint.encode(), cache_dir.encode() if cache_dir else None, threads, len(device_handles), array)
