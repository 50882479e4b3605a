"""A model's kind of memory in words a user knows, from its GGUF header.

``MemoryKind`` is what the engine needs (four kinds); a person choosing a model wants to
know what the model actually keeps: "hybrid: DeltaNet + attention", "sliding window 1024
(1:5)", "recurrent: Mamba-2". The recurrent part is named per architecture family (from
llama.cpp's graph for each architecture); the window, its pattern and shared-KV layers
come from the header's own keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from math import gcd

from sessions.memory_kind import MemoryKind

RECURRENT_NAMES = {
    "mamba": "Mamba", "mamba2": "Mamba-2", "rwkv6": "RWKV-6", "rwkv6qwen2": "RWKV-6",
    "rwkv7": "RWKV-7", "arwkv7": "RWKV-7",
}
"""Purely recurrent architectures: what their one running state is."""

HYBRID_NAMES = {
    "qwen3next": "DeltaNet", "qwen35": "DeltaNet", "qwen35moe": "DeltaNet",
    "kimi-linear": "Kimi Delta Attention",
    "granitehybrid": "Mamba-2", "nemotron_h": "Mamba-2", "nemotron_h_moe": "Mamba-2", "falcon-h1": "Mamba-2",
    "jamba": "Mamba",
    "lfm2": "short convolution", "lfm2moe": "short convolution",
}
"""Hybrid architectures: what their recurrent layers are (others say "recurrent layers")."""

WINDOW_PATTERN_DEFAULTS = {"gemma2": 2, "gemma3": 6, "gpt-oss": 2, "cohere2": 4}
"""The loader's window pattern for architectures whose files may leave the key out: layers
per period, the last of them global."""


def memory_words(kind: MemoryKind | None, arch: str | None, metadata: Mapping[str, object]) -> str | None:
    """The memory of a model of ``arch`` with this header, said in a few words."""
    if kind is None:
        return None
    if kind is MemoryKind.RECURRENT:
        return f"recurrent: {RECURRENT_NAMES.get(arch or '', 'state')}"
    if kind is MemoryKind.HYBRID:
        return f"hybrid: {HYBRID_NAMES.get(arch or '', 'recurrent layers')} + attention"
    if kind is MemoryKind.SWA:
        return _window_words(arch or "", metadata)
    return "plain KV cache"


def _window_words(arch: str, metadata: Mapping[str, object]) -> str:
    window = metadata.get(f"{arch}.attention.sliding_window")
    words = f"sliding window {window}" if isinstance(window, int) else "sliding window"
    ratio = _global_to_windowed(arch, metadata)
    if ratio:
        words += f" ({ratio})"
    shared = metadata.get(f"{arch}.attention.shared_kv_layers")
    if isinstance(shared, int) and not isinstance(shared, bool) and shared > 0:
        words += f", {shared} layers reuse KV"
    return words


def _global_to_windowed(arch: str, metadata: Mapping[str, object]) -> str | None:
    """Global layers to windowed ones, as ``1:5``; None when the header does not say."""
    pattern = metadata.get(f"{arch}.attention.sliding_window_pattern", WINDOW_PATTERN_DEFAULTS.get(arch))
    if isinstance(pattern, (list, tuple)):  # one flag per layer (a longer list was not read)
        windowed = sum(bool(flag) for flag in pattern)
        full = len(pattern) - windowed
    elif isinstance(pattern, int) and not isinstance(pattern, bool) and pattern > 1:
        windowed, full = pattern - 1, 1
    else:
        return None
    if windowed == 0 or full == 0:
        return None
    common = gcd(windowed, full)
    return f"{full // common}:{windowed // common}"
