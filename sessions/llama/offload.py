"""How many layers go to the GPUs and RPC servers when the user leaves it to llamachat.

``n_gpu_layers`` (``-ngl``) takes llama.cpp's own words: a number of layers, counted from
the output end as llama.cpp offloads them, ``all``, or ``auto``, the default, as in
llama-server. A CUDA or Metal build then uses its GPU without being told, and a machine
without one runs on the CPU as before: with no GPU and no RPC server, ``auto`` is 0 and
nothing is read.

``auto`` offloads every layer when the devices' free memory holds them, and otherwise as
many as fit. llama-server fits by building the model and its buffers without data
(``common_fit_params``, in llama.cpp's common library, which llama-cpp-python does not
ship). Here the cost of each layer is estimated from the GGUF header instead: its tensor
bytes, plus the keys and values of its attention heads for the whole context, in the
cache types asked for (``sessions.llama.cache_types``). A sliding-window layer holds
only llama.cpp's ring of cells (``sessions.llama.ring_geometry.ring_size``), where its
architecture's layer pattern is known (``sliding_layers``); elsewhere it is counted at
the full context, on the safe side. It matters: Gemma 3 27B with 32,768 tokens of
context in F16 has 10 global layers of 256 MiB of cache each and 52 windowed ones of
20 MiB (2,560 cells each), 3.5 GiB in all; counting every layer at the full context
makes 15.5 GiB, which would put a third of its layers (Q4_K_M) on the CPU of a 24 GB
GPU that holds them all. ``RESERVE_BYTES`` stay free on each device for llama.cpp's
compute buffers, as in llama.cpp's own fit (its default target). The number found is
part of the checkpoint key like any other number of layers, so a wrong estimate costs
speed or a failed load, never a different result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from sessions.discovery.ggml_types import tensor_nbytes
from sessions.discovery.gguf_header import ModelFileError, read_gguf_header
from sessions.discovery.model_card import split_part_paths
from sessions.llama.devices import Device, devices
from sessions.llama.sequences import SEQUENCES

AUTO = "auto"
ALL = "all"
GpuLayers = int | str
"""A number of layers (-1: every layer), ``"auto"`` or ``"all"``."""
RESERVE_BYTES = 1 << 30
"""Left free on each device: llama.cpp's compute buffers and the backend's own use
(llama.cpp's fit keeps 1 GiB by default, ``fit_params_target``)."""
F16_CACHE = (2.0, 2.0)
"""Bytes per key and per value in the default cache type."""
INPUT_TENSORS = ("token_embd.weight", "position_embd.weight", "token_types.weight")
"""The input layer, which llama.cpp keeps on the CPU whatever ``n_gpu_layers`` says."""


def describe(choice: GpuLayers) -> str:
    """``choice`` in a few words: ``every layer``, ``the layers that fit``, ``3 layers``."""
    if choice == AUTO:
        return "the layers that fit"
    if choice == ALL or (isinstance(choice, int) and choice < 0):
        return "every layer"
    return f"{choice} layer{'s' if choice != 1 else ''}" if choice else "no layer"


@dataclass(frozen=True)
class LayerCosts:
    """Device bytes per layer of a model with its context, as llama.cpp offloads them."""

    blocks: tuple[int, ...]
    """Each repeating layer (``blk.N``): its weights and its K and V cells."""
    output: int
    """The output layer, offloaded first: every tensor outside the blocks but the input
    embeddings (which stay on the CPU), and those too when the model ties them to the
    output, as llama.cpp then copies them there."""

    def fit(self, budget: int) -> int:
        """Layers that fit in ``budget`` bytes, counted as ``n_gpu_layers`` (-1: all)."""
        budget -= self.output
        if budget < 0:
            return 0
        count = 1
        for cost in reversed(self.blocks):
            budget -= cost
            if budget < 0:
                return count
            count += 1
        return -1


SLIDING_PATTERNS: dict[str, int] = {
    "gemma2": 2, "gemma3": 6, "gemma3n": 5, "cohere2": 4, "gpt-oss": 2, "exaone4": 4, "olmo2": 4, "afmoe": 4,
}
"""Architectures whose layers llama.cpp lays out as ``n - 1`` sliding-window layers then
one global layer, repeating: the defaults of ``load_swa_pattern`` in its
``src/models/*.cpp``, which a file's ``{arch}.attention.sliding_window_pattern``
overrides. Others with a window (chunked attention, the global layer first, a window
size fixed in code) are not listed: every layer of theirs counts at the full context."""


def sliding_layers(meta: dict, n_layer: int) -> list[bool]:
    """Which layers llama.cpp gives a sliding-window cache, as its ``set_swa_pattern``
    lays them out; all False when the file or its architecture does not say for sure."""
    arch = str(meta.get("general.architecture", ""))
    none = [False] * n_layer
    window, pattern = meta.get(f"{arch}.attention.sliding_window"), SLIDING_PATTERNS.get(arch)
    if pattern is None or not _is_int(window) or window <= 0:
        return none
    given = meta.get(f"{arch}.attention.sliding_window_pattern", pattern)
    if isinstance(given, list):  # one flag per layer
        return list(given) if len(given) == n_layer and all(isinstance(v, bool) for v in given) else none
    if not _is_int(given) or given < 0:
        return none  # an array too long to have been read, or a value llama.cpp would not take
    return [given == 0 or il % given < given - 1 for il in range(n_layer)]


def _architecture(meta: dict) -> tuple[str, int]:
    """A model's architecture name and its number of repeating layers (0 when unknown)."""
    arch = str(meta.get("general.architecture", ""))
    n_layer = meta.get(f"{arch}.block_count")
    return arch, n_layer if _is_int(n_layer) and n_layer > 0 else 0


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_list(value: object, count: int, default: int) -> list[int]:
    """A per-layer setting: one number for all layers, or one per layer.

    Arrays longer than the header reader keeps come back without their values; the
    default (the larger head count) then stands in, on the safe side."""
    if isinstance(value, list) and len(value) == count and all(isinstance(v, int) for v in value):
        return list(value)
    return [value if _is_int(value) else default] * count


def layer_costs(path: Path | str, n_ctx: int, cache_bytes: tuple[float, float] = F16_CACHE,
                n_batch: int = 512) -> LayerCosts:
    """The costs of ``path`` (every part of a split model) with ``n_ctx`` cells of context
    (0: its trained length) and micro-batches of ``n_batch`` tokens (a sliding window's
    ring holds one besides the window), keys and values taking ``cache_bytes`` bytes each.
    ``ModelFileError`` when a header cannot be read."""
    # Deferred: ring_geometry loads numpy; the config (and so the CLI) imports this module.
    from sessions.llama.ring_geometry import padded, ring_size

    path = Path(path)
    first = read_gguf_header(path)
    count = first.get("split.count")
    headers = [first] + [read_gguf_header(part) for part in split_part_paths(path, count)[1:]] \
        if isinstance(count, int) and count > 1 else [first]
    arch, n_layer = _architecture(first.metadata)
    sizes: dict[str, int] = {}
    for header in headers:
        for tensor in header.tensors:
            sizes[tensor.name] = tensor_nbytes(tensor.type_id, tensor.n_elements) or 0
    blocks = [0] * n_layer
    for name, size in sizes.items():
        number = name.split(".", 2)[1] if name.startswith("blk.") else ""
        if number.isdigit() and int(number) < n_layer:
            blocks[int(number)] += size
    output = sum(size for name, size in sizes.items() if not name.startswith("blk.") and name not in INPUT_TENSORS)
    if "output.weight" not in sizes:
        output += sizes.get("token_embd.weight", 0)
    trained = first.get(f"{arch}.context_length")
    cells = padded(n_ctx or (trained if _is_int(trained) and trained > 0 else 0))
    window = first.get(f"{arch}.attention.sliding_window")
    ring = ring_size(cells, window, SEQUENCES, n_batch) if _is_int(window) and window > 0 else cells
    layer_cells = [ring if sliding else cells for sliding in sliding_layers(first.metadata, n_layer)]
    per_cell = kv_bytes_per_cell(first.metadata, cache_bytes)
    return LayerCosts(tuple(w + kv * n for w, kv, n in zip(blocks, per_cell, layer_cells, strict=True)), output)


def kv_bytes_per_cell(meta: dict, cache_bytes: tuple[float, float] = F16_CACHE) -> list[int]:
    """Key and value bytes one cell of context costs in each layer (0: no attention), from
    a GGUF header's metadata."""
    arch, n_layer = _architecture(meta)
    heads = meta.get(f"{arch}.attention.head_count")
    most = max(heads) if isinstance(heads, list) and heads and all(isinstance(h, int) for h in heads) else heads
    most = most if _is_int(most) else 0
    kv_heads = _int_list(meta.get(f"{arch}.attention.head_count_kv", heads), n_layer, most)
    embd = meta.get(f"{arch}.embedding_length")
    head_dim = embd // most if isinstance(embd, int) and most else 0
    key = meta.get(f"{arch}.attention.key_length", head_dim)
    value = meta.get(f"{arch}.attention.value_length", key)
    key = key if isinstance(key, int) else head_dim
    value = value if isinstance(value, int) else key
    return [round(n * (key * cache_bytes[0] + value * cache_bytes[1])) for n in kv_heads]


def accelerator_free_bytes() -> list[int]:
    """Free memory of each GPU of this process that llama.cpp offloads to (RPC servers'
    devices not included); none when ggml's device registry cannot be reached."""
    try:
        found = devices()
    except OSError:
        return []
    return offload_targets(found)


def offload_targets(found: Sequence[Device]) -> list[int]:
    """The free bytes of the local devices llama.cpp puts layers on, as its loader picks
    them: the discrete GPUs, or the integrated ones when there is none (``llama.cpp``'s
    ``llama_model_load``); an accelerator such as BLAS takes no layers."""
    local = [d for d in found if not d.is_rpc]
    gpus = [d for d in local if d.kind == "GPU"] or [d for d in local if d.kind == "iGPU"]
    return [d.free_bytes or 0 for d in gpus]


def resolve_gpu_layers(
    choice: GpuLayers, path: Path | str, n_ctx: int, free: Sequence[int] | None = None,
    rpc_free: Sequence[int] = (), cache_bytes: tuple[float, float] = F16_CACHE, n_batch: int = 512,
) -> int:
    """``choice`` as the number llama.cpp takes (-1: every layer).

    ``free``: each local GPU's free bytes (default: asked of ggml's device registry);
    ``rpc_free``: those of the RPC servers' devices (from their probe); ``cache_bytes``:
    bytes per key and per value in the cache; ``n_batch``: the context's micro-batch."""
    if choice == ALL:
        return -1
    if isinstance(choice, int):
        return choice
    if choice != AUTO:
        raise ValueError(f"unknown number of GPU layers: {choice!r}")
    free = [*(accelerator_free_bytes() if free is None else free), *rpc_free]
    if not free:
        return 0
    budget = sum(max(0, size - RESERVE_BYTES) for size in free)
    try:
        costs = layer_costs(path, n_ctx, cache_bytes, n_batch)
    except (ModelFileError, OSError):
        return 0  # llama.cpp's loader, next, says what is wrong with the file
    return costs.fit(budget)
