"""Which device each layer of a loaded model went to, and how to say it in a few words.

llama.cpp decides the placement while it loads (``n_gpu_layers`` from the end, spread
over the devices by ``tensor_split`` or by their free memory) and tells it only in its
debug log ("layer 3 assigned to device RPC1"); ``PlacementLog`` reads those lines. The
placement is part of a checkpoint's compatibility key: the same tokens computed with
another split of layers over other hardware can differ in the last bits, so a state
saved under one split must not be restored under another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sessions.llama.native import ggml

_ASSIGNED = re.compile(r"load_tensors: layer\s+(\d+) assigned to device ([^,\s]+)")


@dataclass(frozen=True)
class Placement:
    """The device of each repeating layer and, last, of the output layer.

    Labels are ``CPU``, ``RPC[host:port]`` or ``<name>[<hardware>]`` (``CUDA0[...]``).
    The input layer (token embeddings) always stays on the CPU.
    """

    layers: tuple[str, ...]
    attention_elsewhere: tuple[str, str] | None = None
    """``(device, instead)`` when llama.cpp has no flash-attention kernel for this model
    on a device that holds layers and runs their attention on ``instead`` (the CPU):
    found by ``attention_check``, told by ``attention_notice``."""

    @property
    def local_only(self) -> bool:
        return all(label == "CPU" for label in self.layers)

    @property
    def on_local_gpu(self) -> bool:
        """Whether a layer is on a device of this machine other than its CPU."""
        return any(label != "CPU" and not label.startswith("RPC[") for label in self.layers)

    @property
    def rpc_endpoints(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(label[4:-1] for label in self.layers if label.startswith("RPC[")))

    def key(self) -> str:
        """Canonical text for the compatibility key; empty when everything is on the CPU."""
        if self.local_only:
            return ""
        runs: list[list] = []
        for index, label in enumerate(self.layers):
            if runs and runs[-1][0] == label:
                runs[-1][2] = index
            else:
                runs.append([label, index, index])
        return ",".join(f"{label}:{a}-{b}" for label, a, b in runs)

    def summary(self) -> str:
        """E.g. ``CPU + 2 RPC (127.0.0.1:50052, 127.0.0.1:50053)``, or ``CPU + CUDA0
        (attention on CPU)`` when its attention runs elsewhere."""
        parts = ["CPU"]
        others = [label.split("[")[0] for label in dict.fromkeys(self.layers) if label != "CPU"
                  and not label.startswith("RPC[")]
        parts += others
        rpc = self.rpc_endpoints
        if rpc:
            parts.append(f"{len(rpc)} RPC ({', '.join(rpc)})")
        elsewhere = f" (attention on {self.attention_elsewhere[1]})" if self.attention_elsewhere else ""
        return " + ".join(parts) + elsewhere

    def attention_notice(self) -> str | None:
        """What the user should know when attention does not run where its layers are."""
        if self.attention_elsewhere is None:
            return None
        device, instead = self.attention_elsewhere
        where = "the CPU" if instead == "CPU" else instead
        return (f"llama.cpp has no flash-attention kernel on {device} for this model (its head size or "
                f"cache type), so the attention of its layers there runs on {where}: prompts and replies "
                f"will be much slower than {device} allows. llamachat keeps flash attention on, as its "
                "exact checkpoints need")


class PlacementLog:
    """Collects llama.cpp's "assigned to device" lines while a model loads."""

    def __init__(self) -> None:
        self.assigned: dict[int, str] = {}

    def __call__(self, _level: int, line: str) -> None:
        found = _ASSIGNED.search(line)
        if found:
            self.assigned[int(found.group(1))] = found.group(2)

    def placement(self) -> Placement | None:
        """The placement read, device names resolved to labels; None if none was logged."""
        if not self.assigned:
            return None
        labels = {name: name if name == "CPU" else _label(name) for name in set(self.assigned.values())}
        return Placement(tuple(labels[self.assigned[i]] for i in sorted(self.assigned)))


def _label(name: str) -> str:
    """``RPC[endpoint]`` for an RPC device, ``name[hardware]`` for another."""
    try:
        g = ggml()
    except OSError:  # the registry cannot be reached on this platform: the name alone
        return name
    dev = g.dev_by_name(name.encode())
    description = (g.dev_description(dev) or b"").decode("utf-8", "replace") if dev else ""
    return f"RPC[{description}]" if name.startswith("RPC") else f"{name}[{description}]"


def describe_devices(engine) -> str:
    """A short description of the devices a loaded engine uses, for a status line.

    ``CPU``, ``CPU + CUDA0``, ``CPU + 2 RPC (127.0.0.1:50052, 127.0.0.1:50053)``; empty
    when the engine does not say (a stand-in engine in tests).
    """
    placement = placement_of(engine)
    return placement.summary() if placement is not None else ""


def placement_of(engine) -> Placement | None:
    """Where a loaded engine's layers are, when it says (a stand-in engine in tests may not)."""
    placement = getattr(engine, "placement", None)
    return placement if isinstance(placement, Placement) else None
