"""The GGUF key/values of a made model's architecture (the maker adds the tokenizer's).

The keys are the ones llama.cpp's loader reads for each architecture (``load_hparams`` in
the vendored ``src/llama-model.cpp`` and ``load_arch_hparams`` in ``src/models/<arch>.cpp``),
written the way its conversion script writes them for the real models (``conversion/``);
required keys are always written, optional ones only when a real model of that kind would
carry them. Integers are written as uint32, floats as float32, tuples as arrays.
"""

from __future__ import annotations

from .archs import RMS_EPS, ModelSpec

Keys = list[tuple[str, object]]


def metadata(spec: ModelSpec) -> Keys:
    """The architecture's GGUF key/values, in file order."""
    arch = spec.arch
    keys: Keys = [
        (f"{arch}.context_length", spec.n_ctx_train),
        (f"{arch}.embedding_length", spec.n_embd),
        (f"{arch}.block_count", spec.n_layer),
        (f"{arch}.attention.layer_norm_rms_epsilon", RMS_EPS),
    ]
    if arch in _NEWER:
        return keys + _NEWER[arch](spec)
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
        keys += [
            (f"{arch}.attention.head_count_kv", _kv_heads_per_layer(spec)),
            (f"{arch}.shortconv.l_cache", spec.shortconv_l_cache),
        ]
    else:
        keys.append((f"{arch}.attention.head_count_kv", spec.n_head_kv))
    if arch == "gemma3":
        keys += [
            (f"{arch}.attention.sliding_window", spec.swa_window),
            (f"{arch}.attention.sliding_window_pattern", spec.window_period),
            (f"{arch}.rope.freq_base_swa", 10000.0),
        ]
    return keys


def _kv_heads_per_layer(spec: ModelSpec) -> tuple[int, ...]:
    return tuple(spec.layer_kv_heads(i) if spec.is_attention_layer(i) else 0 for i in range(spec.n_layer))


def _attention(spec: ModelSpec, kv_heads: object | None = None) -> Keys:
    arch = spec.arch
    return [
        (f"{arch}.feed_forward_length", spec.n_ff),
        (f"{arch}.attention.head_count", spec.n_head),
        (f"{arch}.attention.head_count_kv", spec.n_head_kv if kv_heads is None else kv_heads),
        (f"{arch}.attention.key_length", spec.head_dim),
        (f"{arch}.attention.value_length", spec.head_dim),
    ]


def _ssm(spec: ModelSpec) -> Keys:
    arch = spec.arch
    return [
        (f"{arch}.ssm.conv_kernel", spec.ssm_d_conv),
        (f"{arch}.ssm.state_size", spec.ssm_d_state),
        (f"{arch}.ssm.group_count", spec.ssm_n_group),
        (f"{arch}.ssm.time_step_rank", spec.ssm_dt_rank),
        (f"{arch}.ssm.inner_size", spec.ssm_d_inner),
    ]


def _experts(spec: ModelSpec) -> Keys:
    arch = spec.arch
    return [
        (f"{arch}.expert_count", spec.n_expert),
        (f"{arch}.expert_used_count", spec.n_expert_used),
        (f"{arch}.expert_feed_forward_length", spec.n_ff_exp),
    ]


def _qwen(spec: ModelSpec) -> Keys:
    """Qwen3.5 and Qwen3-Next: DeltaNet layers with attention every few layers, a long RoPE
    base over a quarter of each head (Qwen3.5 in IMROPE sections)."""
    arch = spec.arch
    keys = _attention(spec) + [
        (f"{arch}.rope.freq_base", 10000000.0),
        (f"{arch}.rope.dimension_count", spec.n_rot),
    ]
    if spec.rope_sections:
        keys.append((f"{arch}.rope.dimension_sections", spec.rope_sections))
    keys += _ssm(spec)
    interval = spec.attention_layers[0] + 1
    keys += [
        (f"{arch}.attention.recurrent_layers",
         tuple(not spec.is_attention_layer(i) for i in range(spec.n_layer))),
        (f"{arch}.full_attention_interval", interval),
    ]
    if spec.n_expert:
        keys += _experts(spec) + [(f"{arch}.expert_shared_feed_forward_length", spec.n_ff_shexp)]
    return keys


def _gemma4(spec: ModelSpec) -> Keys:
    arch = spec.arch
    keys = _attention(spec, _kv_heads_per_layer(spec)) + [
        (f"{arch}.attention.key_length_swa", spec.head_dim_swa),
        (f"{arch}.attention.value_length_swa", spec.head_dim_swa),
        # Global layers rotate a quarter of each head through ``rope_freqs`` ("proportional"
        # RoPE), so their rotary count is the whole head; windowed layers rotate all of theirs.
        (f"{arch}.rope.dimension_count", spec.head_dim),
        (f"{arch}.rope.dimension_count_swa", spec.head_dim_swa),
        (f"{arch}.rope.freq_base", 1000000.0),
        (f"{arch}.rope.freq_base_swa", 10000.0),
        (f"{arch}.attention.sliding_window", spec.swa_window),
        (f"{arch}.attention.sliding_window_pattern", tuple(spec.is_swa_layer(i) for i in range(spec.n_layer))),
        (f"{arch}.attention.shared_kv_layers", spec.n_kv_shared_layers),
        (f"{arch}.embedding_length_per_layer_input", spec.n_embd_per_layer),
    ]
    if spec.final_logit_softcap:
        keys.append((f"{arch}.final_logit_softcapping", spec.final_logit_softcap))
    return keys


def _gpt_oss(spec: ModelSpec) -> Keys:
    """The window alternates with full attention by the loader's default pattern (2)."""
    arch = spec.arch
    return _attention(spec) + _experts(spec) + [
        (f"{arch}.rope.freq_base", 150000.0),
        (f"{arch}.attention.sliding_window", spec.swa_window),
    ]


def _granitehybrid(spec: ModelSpec) -> Keys:
    """Attention layers are those with KV heads; ``rope.scaling.finetuned`` false turns RoPE
    off (Granite 4.0-H's attention has no positions)."""
    arch = spec.arch
    return _attention(spec, _kv_heads_per_layer(spec)) + _ssm(spec) + [
        (f"{arch}.rope.scaling.finetuned", False),
    ]


def _mamba2(spec: ModelSpec) -> Keys:
    return _ssm(spec)


_NEWER = {
    "qwen35": _qwen,
    "qwen3next": _qwen,
    "gemma4": _gemma4,
    "gpt-oss": _gpt_oss,
    "granitehybrid": _granitehybrid,
    "mamba2": _mamba2,
}
