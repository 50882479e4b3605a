"""The types llama.cpp can keep the K and V cache in (``-ctk`` and ``-ctv``), by name.

A quantized cache takes less memory per token of context (q8_0 keeps 32 values in 34
bytes where f16 takes 64), so a longer context fits, and checkpoints and restores move
fewer bytes. llama.cpp refuses a type whose blocks do not divide the model's head size;
``LlamaContext`` then says so in its words. The types are part of a checkpoint's key,
and every restore gives the bits a recompute with the same types gives.
"""

from __future__ import annotations

from sessions.discovery.ggml_types import TENSOR_TYPES

CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
"""llama.cpp's choices for ``--cache-type-k`` and ``--cache-type-v`` (``kv_cache_types``
in its ``common/arg.cpp``)."""
DEFAULT = "f16"
_IDS = {name.lower(): type_id for type_id, (name, _, _) in TENSOR_TYPES.items()}


def type_id(name: str) -> int:
    """ggml's id of the cache type ``name`` (one of ``CACHE_TYPES``)."""
    if name not in CACHE_TYPES:
        raise ValueError(f"unknown cache type {name!r}: one of {', '.join(CACHE_TYPES)}")
    return _IDS[name]


def bytes_per_value(type_id: int) -> float:
    """Bytes one cached value takes in the type with ggml id ``type_id``."""
    _, elements, size = TENSOR_TYPES[type_id]
    return size / elements
