"""Real models' KV and state shapes on thin bodies, for benchmarks that measure bytes.

What a checkpoint costs depends on the shape of a model's memory, not on its weights: the
layer count, which layers are windowed, recurrent or reuse another's KV, the KV heads and
their sizes, the window, the recurrent state's dimensions. Each shape here keeps those of a
released model and thins everything else (a 256-wide residual, small FFNs, two or four
experts, a 32k vocabulary), so a CPU can prefill a few thousand tokens of it.
``memory_bytes.memory_bytes`` gives the bytes each one holds per token and per state.

The numbers are those of each model's ``config.json`` on Hugging Face (named per shape) as
llama.cpp's conversion maps them (``conversion/gemma.py``, ``qwen.py``, ``gpt_oss.py``,
``granite.py`` in the vendored tree), checked against the layer counts the vendored loader
names (``src/models/<arch>.cpp``: 34 and 62 layers are Gemma 3 4B and 27B, 60 is Gemma 4 31B,
35 is E2B, 24 is gpt-oss-20b, 32 layers of 4096 is Qwen3.5-9B, 4096 wide is Granite 4.0-H
32B-A9B) and against the sizes users report (a Gemma 3 27B window of about 430 MB, Gemma 4
31B about 800 MB, a Qwen3.5-9B state about 50 MB, Granite-4.0-H-Small about 150 MB).
Granite's is the one shape whose state dimensions differ (its bytes do not much): see there.
"""

from __future__ import annotations

from dataclasses import dataclass

from .sizes import every


@dataclass(frozen=True)
class Shape:
    """A real model's memory shape on a thin body."""

    arch: str
    model: str
    """The released model it stands for (its Hugging Face name)."""
    fields: dict
    """``ModelSpec`` fields (``arch``, ``size``, ``n_ctx_train`` and ``weights_f16`` aside)."""


_THIN = dict(n_embd=256, n_ff=512, vocab_size=32000)

SHAPES: dict[str, Shape] = {
    # 34 layers, 5 windowed of 1,024 then 1 global; 8 query and 4 KV heads of 256.
    "gemma3-4b": Shape("gemma3", "google/gemma-3-4b-it", dict(
        _THIN, n_layer=34, n_head=8, n_head_kv=4, head_dim=256, swa_window=1024)),
    # 62 layers, the same pattern; 32 query and 16 KV heads of 128.
    "gemma3-27b": Shape("gemma3", "google/gemma-3-27b-it", dict(
        _THIN, n_layer=62, n_head=32, n_head_kv=16, head_dim=128, swa_window=1024)),
    # 60 layers, 5 windowed of 1,024 then 1 global. Windowed: 16 KV heads of 256; global: 4 KV
    # heads of 512 (global_head_dim, num_global_key_value_heads) whose keys are their values
    # (attention_k_eq_v). 32 query heads; final logits soft-capped at 30.
    "gemma4-31b": Shape("gemma4", "google/gemma-4-31B-it", dict(
        _THIN, n_layer=60, n_head=32, n_head_kv=4, head_dim=512, n_head_kv_swa=16, head_dim_swa=256,
        swa_window=1024, swa_period=6, attention_k_eq_v=True, final_logit_softcap=30.0)),
    # 35 layers, 4 windowed of 512 then 1 global; the last 20 layers keep no KV of their own
    # (num_kv_shared_layers): windowed ones read layer 13's, global ones layer 14's. One KV
    # head (256 windowed, 512 global), 8 query heads; per-layer embeddings thinned from 256.
    "gemma4-e2b": Shape("gemma4", "google/gemma-4-E2B-it", dict(
        _THIN, n_layer=35, n_head=8, n_head_kv=1, head_dim=512, head_dim_swa=256, swa_window=512,
        swa_period=5, n_kv_shared_layers=20, n_embd_per_layer=32, final_logit_softcap=30.0)),
    # 24 layers alternating a window of 128 and full attention; 64 query and 8 KV heads of 64,
    # sinks; 32 experts (4 used) become 4 (2 used).
    "gpt-oss-20b": Shape("gpt-oss", "openai/gpt-oss-20b", dict(
        _THIN, n_layer=24, n_head=64, n_head_kv=8, head_dim=64, swa_window=128, swa_period=2,
        n_expert=4, n_expert_used=2, n_ff_exp=256)),
    # 32 layers, gated attention every 4th (full_attention_interval): 16 query and 4 KV heads
    # of 256, a quarter rotated in IMROPE sections 11/11/10. DeltaNet: 16 key heads and 32
    # value heads of 128, convolution of 4.
    "qwen3.5-9b": Shape("qwen35", "Qwen/Qwen3.5-9B", dict(
        _THIN, n_layer=32, attention_layers=every(4, 32), n_head=16, n_head_kv=4, head_dim=256, n_rot=64,
        rope_sections=(11, 11, 10, 0), ssm_d_conv=4, ssm_d_state=128, ssm_n_group=16, ssm_dt_rank=32,
        ssm_d_inner=4096)),
    # 40 layers, one in ten attention without positions: 32 query and 8 KV heads of 128. Its
    # Mamba-2 layers hold 128 heads of 64 with a state of 128 (inner size 8,192, 1 group,
    # convolution of 4). llama.cpp's loader requires an inner size of twice the embedding, so
    # those dimensions would bring back the 4,096-wide body (4B weights, too slow on a CPU):
    # this shape keeps the heads of 64, the group and the SSM state's bytes instead, with an
    # inner size of 4,096 and a state of 256 (CUDA's kernel takes states of 256). Per layer
    # that is 4,249,600 bytes against the real 4,295,680 (the convolution's part is smaller).
    "granite-4.0-h-small": Shape("granitehybrid", "ibm-granite/granite-4.0-h-small", dict(
        n_embd=2048, n_ff=512, vocab_size=32000, n_layer=40, attention_layers=(5, 15, 25, 35),
        n_head=32, n_head_kv=8, head_dim=128,
        ssm_d_conv=4, ssm_d_inner=4096, ssm_d_state=256, ssm_n_group=1, ssm_dt_rank=64)),
}
