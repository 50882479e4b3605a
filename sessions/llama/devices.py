"""The devices in ggml's registry (CPU, GPUs, RPC servers once added), with their free memory.

``offload`` sizes ``-ngl auto`` from them; ``rpc.backend`` adds RPC servers to the same registry.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from sessions.llama.native import ggml

DEVICE_KINDS = {0: "CPU", 1: "GPU", 2: "iGPU", 3: "accelerator", 4: "meta"}


@dataclass(frozen=True)
class Device:
    """One device in ggml's registry."""

    name: str
    """ggml's name: ``CPU``, ``CUDA0``, ``Metal``, ``RPC0``..."""
    description: str
    """The hardware (``AMD EPYC``, ``NVIDIA GeForce RTX 4090``) or, for RPC, the endpoint."""
    kind: str
    free_bytes: int | None = None
    """Memory reported by the device (None for RPC devices, which would need a connection)."""
    total_bytes: int | None = None

    @property
    def is_rpc(self) -> bool:
        return self.name.startswith("RPC")


def devices() -> list[Device]:
    """Every device ggml knows in this process, local ones with their memory."""
    g = ggml()
    found = []
    for index in range(g.dev_count()):
        dev = g.dev_get(index)
        name = (g.dev_name(dev) or b"?").decode("utf-8", "replace")
        description = (g.dev_description(dev) or b"").decode("utf-8", "replace")
        kind = DEVICE_KINDS.get(g.dev_type(dev), "device")
        if name.startswith("RPC"):
            found.append(Device(name, description, "RPC"))
            continue
        free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
        g.dev_memory(dev, ctypes.byref(free), ctypes.byref(total))
        found.append(Device(name, description, kind, free.value, total.value))
    return found
