"""Shapes and GGUF metadata of the made models, one entry per architecture and size.

Each architecture stands for one kind of model memory (see ``MemoryKind``), because that
is what the engine's checkpointing has to get right: ``llama`` has a plain KV cache,
``gemma3`` interleaves sliding-window layers (5 windowed, then 1 global), ``lfm2`` mixes
attention with short-convolution layers, and ``mamba`` is purely recurrent.

Three sizes exist. ``tiny`` loads in milliseconds and is what tests and the demo use.
``bench`` has about 100M parameters in realistic layer shapes (F16 weights, grouped-query
attention, a 32k vocabulary whose output layer costs what it costs in real models), so
benchmarks measure state sizes and evaluation times of a meaningful order on a CPU.
``gpu`` has about 2B parameters (a 4 GB file), the size people run on one GPU, with heads
of 128 dimensions: CUDA has flash-attention kernels for that size (not for every size:
with 160, llama.cpp runs attention on the CPU, and a benchmark measures that instead).

The metadata keys are the ones llama.cpp's loader reads for each architecture (see
``load_hparams`` and ``load_arch_hparams`` in the vendored ``src/llama-model.cpp`` and
``src/models/<arch>.cpp``); required keys are always written, optional ones only when a
real model of that kind would carry them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..memory_kind import MemoryKind
from .errors import SynthError

ARCHS = ("llama", "gemma3", "lfm2", "mamba")
SIZES = ("tiny", "bench", "gpu")

_KINDS = {
    "llama": MemoryKind.PLAIN,
    "gemma3": MemoryKind.SWA,
    "lfm2": MemoryKind.HYBRID,
    "mamba": MemoryKind.RECURRENT,
}

GEMMA3_SWA_PATTERN = 6
"""Gemma 3's layer pattern: layers 0-4 use the sliding window, layer 5 is global, repeat."""

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
    """Matrices in F16 (bench, gpu) or everything in F32 (tiny, exact and small anyway)."""
    n_head: int = 0
    n_head_kv: int = 0
    head_dim: int = 0
    swa_window: int = 0
    attention_layers: tuple[int, ...] = ()
    """lfm2 only: which layers are attention; the others are short convolutions."""
    shortconv_l_cache: int = 0
    ssm_d_conv: int = 0
    ssm_d_inner: int = 0
    ssm_d_state: int = 0
    ssm_dt_rank: int = 0

    @property
    def kind(self) -> MemoryKind:
        return _KINDS[self.arch]

    def is_attention_layer(self, layer: int) -> bool:
        if self.arch == "mamba":
            return False
        if self.arch == "lfm2":
            return layer in self.attention_layers
        return True


_TINY_ATTENTION = dict(n_embd=128, n_ff=256, vocab_size=1024, n_head=4, n_head_kv=2, head_dim=32)
_BENCH_ATTENTION = dict(n_embd=640, n_ff=1280, vocab_size=32000, n_head=10, n_head_kv=2, head_dim=64)
_GPU_ATTENTION = dict(n_embd=2048, n_ff=8192, vocab_size=32000, n_head=16, n_head_kv=4, head_dim=128)

_SPECS: dict[tuple[str, str], dict] = {
    ("llama", "tiny"): dict(_TINY_ATTENTION, n_layer=4),
    ("gemma3", "tiny"): dict(_TINY_ATTENTION, n_layer=6),
    ("lfm2", "tiny"): dict(_TINY_ATTENTION, n_layer=6, attention_layers=(2, 5), shortconv_l_cache=3),
    ("mamba", "tiny"): dict(
        n_embd=128, n_ff=0, vocab_size=1024, n_layer=4,
        ssm_d_conv=4, ssm_d_inner=256, ssm_d_state=16, ssm_dt_rank=8,
    ),
    ("llama", "bench"): dict(_BENCH_ATTENTION, n_layer=18),
    ("gemma3", "bench"): dict(_BENCH_ATTENTION, n_layer=18),
    ("lfm2", "bench"): dict(
        _BENCH_ATTENTION, n_layer=18, attention_layers=(2, 5, 8, 11, 14, 17), shortconv_l_cache=3,
    ),
    ("mamba", "bench"): dict(
        n_embd=640, n_ff=0, vocab_size=32000, n_layer=24,
        ssm_d_conv=4, ssm_d_inner=1280, ssm_d_state=16, ssm_dt_rank=40,
    ),
    ("llama", "gpu"): dict(_GPU_ATTENTION, n_layer=30),
    ("gemma3", "gpu"): dict(_GPU_ATTENTION, n_layer=30),
    ("lfm2", "gpu"): dict(
        _GPU_ATTENTION, n_layer=30, attention_layers=tuple(range(2, 30, 3)), shortconv_l_cache=3,
    ),
    ("mamba", "gpu"): dict(
        n_embd=2048, n_ff=0, vocab_size=32000, n_layer=64,
        ssm_d_conv=4, ssm_d_inner=4096, ssm_d_state=16, ssm_dt_rank=128,
    ),
}


def expected_kind(arch: str) -> MemoryKind:
    """The memory kind a made model of ``arch`` has."""
    _check_arch(arch)
    return _KINDS[arch]


def model_spec(arch: str, size: str = "tiny", *, swa_window: int = 64, n_ctx_train: int = 8192) -> ModelSpec:
    """The full description of one made model; raises ``SynthError`` for bad requests."""
    _check_arch(arch)
    if size not in SIZES:
        raise SynthError(f"unknown model size {size!r}: choose one of {', '.join(SIZES)}")
    if isinstance(n_ctx_train, bool) or not isinstance(n_ctx_train, int) or n_ctx_train < 16:
        raise SynthError(f"the training context must be a whole number of at least 16, not {n_ctx_train!r}")
    spec = ModelSpec(arch=arch, size=size, n_ctx_train=n_ctx_train, weights_f16=size != "tiny",
                     **_SPECS[arch, size])
    if arch == "gemma3":
        if isinstance(swa_window, bool) or not isinstance(swa_window, int) or swa_window < 1:
            raise SynthError(f"the sliding window must be a positive whole number of tokens, not {swa_window!r}")
        spec = replace(spec, swa_window=swa_window)
    return spec


def _check_arch(arch: str) -> None:
    if arch not in ARCHS:
        raise SynthError(f"unknown model architecture {arch!r}: choose one of {', '.join(ARCHS)}")


def metadata(spec: ModelSpec) -> list[tuple[str, object]]:
    """The architecture's GGUF key/values (tokenizer keys are added by the maker).

    Integers are written as uint32, floats as float32, tuples as arrays.
    """
    arch = spec.arch
    keys: list[tuple[str, object]] = [
        (f"{arch}.context_length", spec.n_ctx_train),
        (f"{arch}.embedding_length", spec.n_embd),
        (f"{arch}.block_count", spec.n_layer),
        (f"{arch}.attention.layer_norm_rms_epsilon", RMS_EPS),
    ]
    if arch == "mamba":
        keys += [
            (f"{arch}.ssm.conv_kernel", spec.ssm_d_conv),
            (f"{arch}.ssm.inner_size", spec.ssm_d_inner),
            (f"{arch}.ssm.state_size", spec.ssm_d_state),
            (f"{arch}.ssm.time_step_rank", spec.ssm_dt_rank),
        ]
        return keys
    keys += [
        (f"{arch}.feed_forward_length", spec.n_ff),
        (f"{arch}.attention.head_count", spec.n_head),
        (f"{arch}.attention.key_length", spec.head_dim),
        (f"{arch}.attention.value_length", spec.head_dim),
        # Gemma 3's global layers use a long RoPE base, its windowed layers the usual one.
        (f"{arch}.rope.freq_base", 1000000.0 if arch == "gemma3" else 10000.0),
    ]
    if arch == "lfm2":
        # The loader marks a layer recurrent (short conv) when its KV head count is 0.
        per_layer = tuple(spec.n_head_kv if spec.is_attention_layer(i) else 0 for i in range(spec.n_layer))
        keys += [
            (f"{arch}.attention.head_count_kv", per_layer),
            (f"{arch}.shortconv.l_cache", spec.shortconv_l_cache),
        ]
    else:
        keys.append((f"{arch}.attention.head_count_kv", spec.n_head_kv))
    if arch == "gemma3":
        keys += [
            (f"{arch}.attention.sliding_window", spec.swa_window),
            (f"{arch}.attention.sliding_window_pattern", GEMMA3_SWA_PATTERN),
            (f"{arch}.rope.freq_base_swa", 10000.0),
        ]
    return keys
