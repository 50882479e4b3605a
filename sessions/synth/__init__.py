"""Deterministic random-weight GGUF models of the architectures llamachat runs.

No model weights can be downloaded where llamachat is developed and tested, yet the
engine's whole point (exact per-message checkpoints of KV, sliding-window and recurrent
state) has to be exercised on every way llama.cpp builds a model's memory. So llamachat makes its own models:
random weights, a real byte-level BPE tokenizer with ChatML control tokens and a chat
template. They write gibberish, but every number they produce is finite and the same on
every run, which is what tests, benchmarks and ``llamachat --demo`` need.

    path = make_model("gemma3", "tiny", swa_window=64)
    path = make_model("qwen35", "qwen3.5-9b")   # a real model's memory shape, thin body
    memory_bytes(model_spec("qwen35", "qwen3.5-9b")).state   # bytes of its recurrent state
"""

from __future__ import annotations

from ..memory_kind import MemoryKind
from .archs import ARCHS, SIZES, ModelSpec, expected_kind, model_spec
from .errors import SynthError
from .maker import FORMAT_REVISION, make_model, model_hash, param_count
from .memory_bytes import MemoryBytes, memory_bytes
from .shapes import SHAPES, Shape

__all__ = [
    "ARCHS",
    "FORMAT_REVISION",
    "SHAPES",
    "SIZES",
    "MemoryBytes",
    "MemoryKind",
    "ModelSpec",
    "Shape",
    "SynthError",
    "expected_kind",
    "make_model",
    "memory_bytes",
    "model_hash",
    "model_spec",
    "param_count",
]
