"""The shapes of the ``tiny``, ``bench`` and ``gpu`` sizes, per architecture.

Each newer architecture keeps the *kind* of structure of its real models, scaled down:
which layers are recurrent and how often attention comes, the window pattern, the head
sizes of windowed and global layers, shared-KV layers, DeltaNet's key and value heads.
``tiny`` stays under 2M parameters, ``bench`` near 100M, ``gpu`` near 2B (heads of 128, and
state sizes CUDA's kernels take: Mamba-2 states of 128).
"""

from __future__ import annotations


def every(interval: int, n_layer: int) -> tuple[int, ...]:
    """Attention every ``interval`` layers, the last of each interval (Qwen3.5's
    ``full_attention_interval``)."""
    return tuple(layer for layer in range(n_layer) if (layer + 1) % interval == 0)


_TINY_ATTENTION = dict(n_embd=128, n_ff=256, vocab_size=1024, n_head=4, n_head_kv=2, head_dim=32)
_BENCH_ATTENTION = dict(n_embd=640, n_ff=1280, vocab_size=32000, n_head=10, n_head_kv=2, head_dim=64)
_GPU_ATTENTION = dict(n_embd=2048, n_ff=8192, vocab_size=32000, n_head=16, n_head_kv=4, head_dim=128)

# Qwen3.5: heads of 256 with a quarter of them rotated (IMROPE sections 11/11/10 of 32 pairs),
# DeltaNet with twice as many value heads as key heads. Scaled: heads of 64 or 128.
_QWEN_TINY = dict(n_embd=128, n_ff=256, vocab_size=1024, n_head=4, n_head_kv=2, head_dim=64, n_rot=16,
                  ssm_d_conv=4, ssm_d_state=32, ssm_n_group=2, ssm_dt_rank=4, ssm_d_inner=128)
_QWEN_BENCH = dict(n_embd=640, n_ff=1280, vocab_size=32000, n_head=8, n_head_kv=2, head_dim=128, n_rot=32,
                   ssm_d_conv=4, ssm_d_state=64, ssm_n_group=4, ssm_dt_rank=8, ssm_d_inner=512)
_QWEN_GPU = dict(n_embd=2048, n_ff=6144, vocab_size=32000, n_head=16, n_head_kv=4, head_dim=128, n_rot=32,
                 ssm_d_conv=4, ssm_d_state=128, ssm_n_group=16, ssm_dt_rank=32, ssm_d_inner=4096)
_QWEN_SECTIONS = {"tiny": (3, 3, 2, 0), "bench": (6, 5, 5, 0), "gpu": (6, 5, 5, 0)}

SIZE_TABLE: dict[tuple[str, str], dict] = {
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

for _size, _base, _n_layer in (("tiny", _QWEN_TINY, 8), ("bench", _QWEN_BENCH, 16), ("gpu", _QWEN_GPU, 24)):
    SIZE_TABLE["qwen35", _size] = dict(
        _base, n_layer=_n_layer, attention_layers=every(4, _n_layer), rope_sections=_QWEN_SECTIONS[_size])

# Qwen3-Next: the same layer mix, every FFN a mixture of experts plus one shared expert.
SIZE_TABLE["qwen3next", "tiny"] = dict(
    _QWEN_TINY, n_layer=8, attention_layers=every(4, 8), n_expert=4, n_expert_used=2, n_ff_exp=32, n_ff_shexp=64)
SIZE_TABLE["qwen3next", "bench"] = dict(
    _QWEN_BENCH, n_layer=16, attention_layers=every(4, 16), n_expert=4, n_expert_used=2, n_ff_exp=256,
    n_ff_shexp=640)
SIZE_TABLE["qwen3next", "gpu"] = dict(
    _QWEN_GPU, n_layer=24, attention_layers=every(4, 24), n_expert=8, n_expert_used=2, n_ff_exp=768,
    n_ff_shexp=2048)

# Gemma 4: windowed layers with smaller heads and more KV heads than the global ones; the
# last layers reuse earlier KV (E2B/E4B), global layers without V (31B), per-layer embeddings.
SIZE_TABLE["gemma4", "tiny"] = dict(
    _TINY_ATTENTION, n_layer=10, n_head_kv=1, head_dim=64, n_head_kv_swa=2, head_dim_swa=32, swa_period=5,
    n_kv_shared_layers=5, n_embd_per_layer=16, attention_k_eq_v=True, final_logit_softcap=30.0)
SIZE_TABLE["gemma4", "bench"] = dict(
    _BENCH_ATTENTION, n_layer=18, n_head_kv=1, head_dim=128, n_head_kv_swa=2, head_dim_swa=64, swa_period=6,
    n_kv_shared_layers=6, n_embd_per_layer=16, attention_k_eq_v=True, final_logit_softcap=30.0)
SIZE_TABLE["gemma4", "gpu"] = dict(
    _GPU_ATTENTION, n_layer=30, n_head_kv=2, head_dim=128, n_head_kv_swa=4, head_dim_swa=128, swa_period=6,
    n_kv_shared_layers=0, attention_k_eq_v=True, final_logit_softcap=30.0)

# gpt-oss: window and global layers alternate; every FFN is a mixture of experts (tiny: one,
# the fewest llama.cpp's loader takes; the router then always picks it).
SIZE_TABLE["gpt-oss", "tiny"] = dict(
    _TINY_ATTENTION, n_layer=4, swa_period=2, n_expert=1, n_expert_used=1, n_ff_exp=128)
SIZE_TABLE["gpt-oss", "bench"] = dict(
    _BENCH_ATTENTION, n_layer=18, swa_period=2, n_expert=4, n_expert_used=2, n_ff_exp=320)
SIZE_TABLE["gpt-oss", "gpu"] = dict(
    _GPU_ATTENTION, n_layer=24, swa_period=2, n_expert=8, n_expert_used=2, n_ff_exp=1280)

# Granite 4.0-H: one attention layer in about ten, the rest Mamba-2 (llama.cpp requires an
# inner size of twice the embedding).
SIZE_TABLE["granitehybrid", "tiny"] = dict(
    _TINY_ATTENTION, n_layer=8, attention_layers=(3, 7),
    ssm_d_conv=4, ssm_d_inner=256, ssm_d_state=32, ssm_n_group=1, ssm_dt_rank=8)
SIZE_TABLE["granitehybrid", "bench"] = dict(
    _BENCH_ATTENTION, n_layer=20, n_ff=1024, attention_layers=(4, 9, 14, 19),
    ssm_d_conv=4, ssm_d_inner=1280, ssm_d_state=128, ssm_n_group=1, ssm_dt_rank=20)
SIZE_TABLE["granitehybrid", "gpu"] = dict(
    _GPU_ATTENTION, n_layer=32, n_ff=5120, attention_layers=(7, 15, 23, 31),
    ssm_d_conv=4, ssm_d_inner=4096, ssm_d_state=128, ssm_n_group=1, ssm_dt_rank=64)

SIZE_TABLE["mamba2", "tiny"] = dict(
    n_embd=128, n_ff=0, vocab_size=1024, n_layer=4,
    ssm_d_conv=4, ssm_d_inner=256, ssm_d_state=32, ssm_n_group=1, ssm_dt_rank=8)
SIZE_TABLE["mamba2", "bench"] = dict(
    n_embd=640, n_ff=0, vocab_size=32000, n_layer=24,
    ssm_d_conv=4, ssm_d_inner=1280, ssm_d_state=128, ssm_n_group=1, ssm_dt_rank=20)
SIZE_TABLE["mamba2", "gpu"] = dict(
    n_embd=2048, n_ff=0, vocab_size=32000, n_layer=64,
    ssm_d_conv=4, ssm_d_inner=4096, ssm_d_state=128, ssm_n_group=1, ssm_dt_rank=64)
