"""Devices in words, for ``llamachat --help`` and ``llamachat models``.

``--help`` lists this machine's devices and whether the RPC backend is built in (no
network); ``models`` also asks each configured RPC server for its devices, with a short
timeout, so a mistyped address shows up before a model is loaded.
"""

from __future__ import annotations

from collections.abc import Sequence

from sessions.llama.devices import devices
from sessions.llama.offload import accelerator_free_bytes, describe
from sessions.rpc.backend import rpc_compiled_in
from sessions.rpc.errors import REBUILD, RpcError
from sessions.rpc.probe import probe


def _gib(n: int | None) -> str:
    return f"{(n or 0) / (1 << 30):.1f} GiB"


def local_devices_line() -> str:
    """``devices: CPU (AMD EPYC, 23.5 GiB free); RPC backend built in``."""
    try:
        local = [d for d in devices() if not d.is_rpc]
        rpc = rpc_compiled_in()
    except (ImportError, OSError) as error:
        return f"devices: unknown (llama.cpp could not be loaded: {error})"
    shown = "; ".join(f"{d.name} ({d.description}, {_gib(d.free_bytes)} free)" for d in local)
    built = "RPC backend built in" if rpc else f"no RPC backend (rebuild: {REBUILD})"
    return f"devices: {shown}; {built}"


def server_lines(endpoints: Sequence[str], timeout: float = 2.0) -> list[str]:
    """One line per RPC server: its devices and memory, or why it cannot be used."""
    lines = []
    for endpoint in endpoints:
        try:
            lines.append(f"RPC server {probe(endpoint, timeout).describe()}")
        except RpcError as error:
            lines.append(str(error))
    return lines


def offload_line(endpoints: Sequence[str], n_gpu_layers: int | str, gpus: Sequence[int] | None = None) -> str:
    """Where the layers would go with these settings (before anything is loaded).

    ``gpus``: the local GPUs' free bytes (default: asked of ggml). Without a GPU or a
    server, nothing can leave the CPU, and the line says so."""
    gpus = accelerator_free_bytes() if gpus is None else gpus
    if not endpoints and not gpus:
        return f"offload (-ngl {n_gpu_layers}): no GPU here, so every layer runs on the CPU"
    local = f"{len(gpus)} local GPU{'s' if len(gpus) != 1 else ''} ({_gib(sum(gpus))} free)" if gpus else ""
    servers = f"{len(endpoints)} RPC server{'s' if len(endpoints) != 1 else ''}" if endpoints else ""
    targets = ", then ".join(part for part in (servers, local) if part)
    return f"offload (-ngl {n_gpu_layers}): {describe(n_gpu_layers)} to {targets}; the rest on the CPU"
