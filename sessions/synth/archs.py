"""What a made model is: its architecture, its size, and every number that decides its bytes.

Each architecture stands for a way llama.cpp builds model memory, because that is what the
engine's checkpointing has to get right:

- ``llama``: a plain KV cache.
- ``gemma3``: sliding-window layers (5 windowed, then 1 global, repeat).
- ``gemma4``: a per-layer window pattern, global layers with other head sizes, and layers
  that reuse an earlier layer's KV instead of keeping their own.
- ``gpt-oss``: a window of 128 alternating with full attention, attention sinks, MoE.
- ``lfm2``: attention plus short-convolution layers.
- ``qwen35``: gated DeltaNet layers plus gated attention with IMROPE positions (each KV
  cell carries extra position data in a saved state).
- ``qwen3next``: DeltaNet plus attention with its own tensor set and MoE.
- ``granitehybrid``: Mamba-2 layers plus attention layers without positions (NoPE).
- ``mamba``, ``mamba2``: purely recurrent.

Sizes: ``tiny`` loads in milliseconds (tests, the demo); ``bench`` has about 100M
parameters in realistic layer shapes (F16 weights, grouped-query attention, a 32k vocabulary
whose output layer costs what it costs in real models); ``gpu`` has about 2B parameters,
with heads of 128 dimensions, for which CUDA has flash-attention kernels. The real-model
shapes of ``shapes.py`` (``gemma3-4b``...) give the KV and state sizes of released models on
a thin body.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from ..memory_kind import MemoryKind
from .errors import SynthError
from .shapes import SHAPES
from .sizes import SIZE_TABLE

ARCHS = ("llama", "gemma3", "lfm2", "mamba", "qwen35", "qwen3next", "gemma4", "gpt-oss", "granitehybrid", "mamba2")
"""Every architecture the maker writes (the first four are the ones the engine tests run)."""
SIZES = ("tiny", "bench", "gpu")

_KINDS = {
    "llama": MemoryKind.PLAIN,
    "gemma3": MemoryKind.SWA,
    "gemma4": MemoryKind.SWA,
    "gpt-oss": MemoryKind.SWA,
    "lfm2": MemoryKind.HYBRID,
    "qwen35": MemoryKind.HYBRID,
    "qwen3next": MemoryKind.HYBRID,
    "granitehybrid": MemoryKind.HYBRID,
    "mamba": MemoryKind.RECURRENT,
    "mamba2": MemoryKind.RECURRENT,
}

GEMMA3_SWA_PATTERN = 6
"""Gemma 3's layer pattern: layers 0-4 use the sliding window, layer 5 is global, repeat."""

DEFAULT_WINDOWS = {"gemma3": 64, "gemma4": 64, "gpt-oss": 128}
"""The window when none is asked for: gpt-oss keeps its real 128 at every size; the Gemmas
keep one small enough that a short test chat slides past it."""

_RECURRENT_ONLY = frozenset({"mamba", "mamba2"})
_MIXED = frozenset({"lfm2", "qwen35", "qwen3next", "granitehybrid"})
"""Architectures whose non-attention layers are recurrent (listed in ``attention_layers``)."""

RMS_EPS = 1e-6


@dataclass(frozen=True)
class ModelSpec:
    """Every number that decides the bytes of a made model (the cache key hashes it)."""

    arch: str
    size: str
    n_embd: int
    n_layer: int
    n_ff: int
    vocab_size: int
    n_ctx_train: int
    weights_f16: bool
    """Matrices in F16 (bench, gpu, shapes) or everything in F32 (tiny, exact and small anyway)."""
    n_head: int = 0
    n_head_kv: int = 0
    """KV heads of the (global) attention layers."""
    head_dim: int = 0
    """Key and value length of the (global) attention layers."""
    swa_window: int = 0
    attention_layers: tuple[int, ...] = ()
    """Mixed architectures: which layers are attention; the others are recurrent."""
    shortconv_l_cache: int = 0
    ssm_d_conv: int = 0
    ssm_d_inner: int = 0
    ssm_d_state: int = 0
    ssm_dt_rank: int = 0
    """Mamba: the time-step rank; Mamba-2 and DeltaNet: the number of (value) heads."""
    # Fields below came later: they enter the cache key only when set (see ``hashed_fields``).
    ssm_n_group: int = 0
    """Mamba-2: groups of B and C; DeltaNet: the number of key heads."""
    n_rot: int = 0
    """Rotary dimensions of the (global) attention layers; 0 for the whole head."""
    rope_sections: tuple[int, ...] = ()
    """IMROPE sections (Qwen3.5): rotary pairs per position component, summing to n_rot/2."""
    swa_period: int = 0
    """Layers per window period, the last of them global (gemma4, gpt-oss; gemma3 has 6)."""
    head_dim_swa: int = 0
    """Key and value length of the windowed layers; 0 for ``head_dim``."""
    n_head_kv_swa: int = 0
    """KV heads of the windowed layers; 0 for ``n_head_kv``."""
    n_kv_shared_layers: int = 0
    """The last this many layers keep no KV of their own and read an earlier layer's (Gemma 4)."""
    n_embd_per_layer: int = 0
    """Gemma 4's per-layer token embeddings (0: none)."""
    attention_k_eq_v: bool = False
    """Gemma 4: global layers have no V projection; the keys serve as values."""
    final_logit_softcap: float = 0.0
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    n_ff_shexp: int = 0
    """Width of the shared expert (qwen3next)."""

    @property
    def kind(self) -> MemoryKind:
        return _KINDS[self.arch]

    @property
    def window_period(self) -> int:
        return GEMMA3_SWA_PATTERN if self.arch == "gemma3" else self.swa_period

    def is_attention_layer(self, layer: int) -> bool:
        if self.arch in _RECURRENT_ONLY:
            return False
        if self.arch in _MIXED:
            return layer in self.attention_layers
        return True

    def is_swa_layer(self, layer: int) -> bool:
        """A windowed layer (llama.cpp's ``set_swa_pattern``: the last of each period is global)."""
        period = self.window_period
        return bool(self.swa_window) and period > 0 and layer % period < period - 1

    def has_own_kv(self, layer: int) -> bool:
        """An attention layer that keeps KV cells of its own (not reusing an earlier layer's)."""
        return self.is_attention_layer(layer) and layer < self.n_layer - self.n_kv_shared_layers

    def layer_head_dim(self, layer: int) -> int:
        return self.head_dim_swa if self.is_swa_layer(layer) and self.head_dim_swa else self.head_dim

    def layer_kv_heads(self, layer: int) -> int:
        return self.n_head_kv_swa if self.is_swa_layer(layer) and self.n_head_kv_swa else self.n_head_kv


_FIELD_NAMES = [f.name for f in fields(ModelSpec)]
_LATER_FIELDS = frozenset(_FIELD_NAMES[_FIELD_NAMES.index("ssm_n_group"):])


def hashed_fields(spec: ModelSpec) -> dict[str, object]:
    """The fields the cache key hashes: those added after the first four architectures
    only when they differ from their default, so the names of earlier files stay valid."""
    defaults = {f.name: f.default for f in fields(ModelSpec) if f.name in _LATER_FIELDS}
    return {name: value for name, value in asdict(spec).items()
            if name not in _LATER_FIELDS or value != defaults[name]}


def expected_kind(arch: str) -> MemoryKind:
    """The memory kind a made model of ``arch`` has."""
    _check_arch(arch)
    return _KINDS[arch]


def is_windowed(arch: str) -> bool:
    return arch in DEFAULT_WINDOWS


def model_spec(arch: str, size: str = "tiny", *, swa_window: int | None = None,
               n_ctx_train: int = 8192) -> ModelSpec:
    """The full description of one made model; raises ``SynthError`` for bad requests.

    ``size`` is one of ``SIZES`` or the name of a real model's shape of this architecture
    (``shapes.SHAPES``). ``swa_window`` sets the window of a windowed architecture at the
    tiny, bench and gpu sizes (None: ``DEFAULT_WINDOWS``); a real shape keeps its own.
    """
    _check_arch(arch)
    if isinstance(n_ctx_train, bool) or not isinstance(n_ctx_train, int) or n_ctx_train < 16:
        raise SynthError(f"the training context must be a whole number of at least 16, not {n_ctx_train!r}")
    if swa_window is not None and (isinstance(swa_window, bool) or not isinstance(swa_window, int)
                                   or swa_window < 1):
        raise SynthError(f"the sliding window must be a positive whole number of tokens, not {swa_window!r}")
    if size in SHAPES:
        shape = SHAPES[size]
        if shape.arch != arch:
            raise SynthError(f"the shape {size!r} is a {shape.arch} model, not {arch}")
        return ModelSpec(arch=arch, size=size, n_ctx_train=n_ctx_train, weights_f16=True, **shape.fields)
    if size not in SIZES:
        shapes = ", ".join(name for name, shape in SHAPES.items() if shape.arch == arch)
        known = ", ".join(SIZES) + (f", or a real shape: {shapes}" if shapes else "")
        raise SynthError(f"unknown model size {size!r}: choose one of {known}")
    spec = ModelSpec(arch=arch, size=size, n_ctx_train=n_ctx_train, weights_f16=size != "tiny",
                     **SIZE_TABLE[arch, size])
    if is_windowed(arch):
        spec = replace(spec, swa_window=swa_window if swa_window is not None else DEFAULT_WINDOWS[arch])
    return spec


def _check_arch(arch: str) -> None:
    if arch not in ARCHS:
        raise SynthError(f"unknown model architecture {arch!r}: choose one of {', '.join(ARCHS)}")
