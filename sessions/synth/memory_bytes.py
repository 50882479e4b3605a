"""The bytes a made model's memory holds, computed from its spec.

Benchmarks report what checkpoints cost against what the model itself holds: the KV of the
unique tokens in every layer, the window of the windowed layers, the recurrent state. These
are the tensor bytes llama.cpp keeps (``n_embd_k_gqa``/``n_embd_v_gqa`` per layer with cells
of its own, ``n_embd_r``/``n_embd_s`` per recurrent layer in F32), without the few bytes of
cell metadata a saved state adds (position and sequence ids: 12 bytes a cell, 24 with
IMROPE's extra position data). A test checks them against llama.cpp's own state sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .archs import ModelSpec

F16_BYTES = 2
"""Bytes of one cached K or V element at the default cache type (-ctk/-ctv f16)."""
STATE_BYTES = 4
"""Recurrent states are F32."""


@dataclass(frozen=True)
class MemoryBytes:
    """The memory of one sequence of a model, in bytes."""

    kv_per_token: int
    """K and V of one token over every layer that keeps its own cells."""
    window_kv_per_token: int
    """The part of ``kv_per_token`` in windowed layers."""
    window: int
    """Tokens a windowed layer needs (0: no windowed layers)."""
    state: int
    """The recurrent state (convolution and SSM or DeltaNet state of every recurrent layer)."""

    @property
    def global_kv_per_token(self) -> int:
        """K and V of one token in the layers that keep every token."""
        return self.kv_per_token - self.window_kv_per_token

    @property
    def window_bytes(self) -> int:
        """A whole window: what a window snapshot holds once the window is full."""
        return self.window_kv_per_token * self.window

    def kv_bytes(self, tokens: int) -> int:
        """The KV of ``tokens`` unique tokens in every layer (each token's window KV once)."""
        return self.kv_per_token * tokens


def memory_bytes(spec: ModelSpec, kv_element_bytes: float = F16_BYTES) -> MemoryBytes:
    """The memory of one sequence of a model made from ``spec`` (``kv_element_bytes``: 1 for
    a q8_0-like cache is close enough for estimates; the default is the f16 cache)."""
    kv = window_kv = 0.0
    state = 0
    for layer in range(spec.n_layer):
        if spec.has_own_kv(layer):
            row = 2 * spec.layer_kv_heads(layer) * spec.layer_head_dim(layer) * kv_element_bytes
            kv += row
            if spec.is_swa_layer(layer):
                window_kv += row
        elif not spec.is_attention_layer(layer):
            state += _recurrent_layer_bytes(spec)
    return MemoryBytes(kv_per_token=round(kv), window_kv_per_token=round(window_kv),
                       window=spec.swa_window if window_kv else 0, state=state)


def _recurrent_layer_bytes(spec: ModelSpec) -> int:
    """llama.cpp's ``n_embd_r() + n_embd_s()`` for this layer, in F32."""
    if spec.shortconv_l_cache:  # LFM2: the last l_cache - 1 inputs of a convolution
        return spec.n_embd * (spec.shortconv_l_cache - 1) * STATE_BYTES
    conv = (spec.ssm_d_conv - 1) * (spec.ssm_d_inner + 2 * spec.ssm_n_group * spec.ssm_d_state)
    return (conv + spec.ssm_d_state * spec.ssm_d_inner) * STATE_BYTES
