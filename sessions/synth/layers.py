"""The tensors of one layer of a made model, per architecture.

Each function mirrors one ``load_arch_tensors`` of the vendored llama.cpp
(``src/models/<arch>.cpp``), in numpy order (``(n_out, n_in)``). Every projection that adds
into the residual stream is a ``WRITER`` (see ``weights.py``: the bias channel stays silent),
and so are the biases of such projections, which are zero.
"""

from __future__ import annotations

from collections.abc import Callable

from .archs import ModelSpec
from .plan import Init, TensorPlan

Make = Callable[[str, tuple[int, ...], Init], TensorPlan]


def layer_tensors(spec: ModelSpec, layer: int) -> list[TensorPlan]:
    """All tensors of layer ``layer``, in file order."""

    def t(name: str, shape: tuple[int, ...], init: Init) -> TensorPlan:
        return TensorPlan(f"blk.{layer}.{name}", shape, init)

    return _BUILDERS.get(spec.arch, _classic)(spec, layer, t)


def _classic(spec: ModelSpec, layer: int, t: Make) -> list[TensorPlan]:
    """llama, gemma3, lfm2 and mamba (their bytes must not change: see FORMAT_REVISION)."""
    d = spec.n_embd
    if spec.arch == "mamba":
        inner, state, rank = spec.ssm_d_inner, spec.ssm_d_state, spec.ssm_dt_rank
        return [
            t("attn_norm.weight", (d,), Init.ONES),
            t("ssm_in.weight", (2 * inner, d), Init.MATRIX),
            t("ssm_conv1d.weight", (inner, spec.ssm_d_conv), Init.CONV),
            t("ssm_conv1d.bias", (inner,), Init.ZEROS),
            t("ssm_x.weight", (rank + 2 * state, inner), Init.MATRIX),
            t("ssm_dt.weight", (inner, rank), Init.MATRIX),
            t("ssm_dt.bias", (inner,), Init.SSM_DT_BIAS),
            t("ssm_a", (inner, state), Init.SSM_A),
            t("ssm_d", (inner,), Init.ONES),
            t("ssm_out.weight", (d, inner), Init.WRITER),
        ]

    tensors = [t("attn_norm.weight", (d,), Init.ONES)]
    if spec.is_attention_layer(layer):
        q_dim, kv_dim = spec.n_head * spec.head_dim, spec.n_head_kv * spec.head_dim
        tensors += [
            t("attn_q.weight", (q_dim, d), Init.MATRIX),
            t("attn_k.weight", (kv_dim, d), Init.MATRIX),
            t("attn_v.weight", (kv_dim, d), Init.MATRIX),
            t("attn_output.weight", (d, q_dim), Init.WRITER),
        ]
        if spec.arch in ("gemma3", "lfm2"):
            tensors += [
                t("attn_q_norm.weight", (spec.head_dim,), Init.ONES),
                t("attn_k_norm.weight", (spec.head_dim,), Init.ONES),
            ]
        if spec.arch == "gemma3":
            tensors.append(t("post_attention_norm.weight", (d,), Init.ONES))
    else:
        tensors += [
            t("shortconv.conv.weight", (d, spec.shortconv_l_cache), Init.CONV),
            t("shortconv.in_proj.weight", (3 * d, d), Init.MATRIX),
            t("shortconv.out_proj.weight", (d, d), Init.WRITER),
        ]
    tensors += _ffn(spec, t)
    if spec.arch == "gemma3":
        tensors.append(t("post_ffw_norm.weight", (d,), Init.ONES))
    return tensors


def _ffn(spec: ModelSpec, t: Make) -> list[TensorPlan]:
    d = spec.n_embd
    return [
        t("ffn_norm.weight", (d,), Init.ONES),
        t("ffn_gate.weight", (spec.n_ff, d), Init.MATRIX),
        t("ffn_up.weight", (spec.n_ff, d), Init.MATRIX),
        t("ffn_down.weight", (d, spec.n_ff), Init.WRITER),
    ]


def _attention(spec: ModelSpec, layer: int, t: Make, *, q_factor: int = 1, v: bool = True) -> list[TensorPlan]:
    """Q, K, V and output projections (``q_factor`` 2: Q carries a gate as wide as itself)."""
    d, head = spec.n_embd, spec.layer_head_dim(layer)
    q_dim, kv_dim = spec.n_head * head, spec.layer_kv_heads(layer) * head
    tensors = [t("attn_q.weight", (q_factor * q_dim, d), Init.MATRIX)]
    if spec.has_own_kv(layer):
        tensors.append(t("attn_k.weight", (kv_dim, d), Init.MATRIX))
        if v:
            tensors.append(t("attn_v.weight", (kv_dim, d), Init.MATRIX))
    tensors.append(t("attn_output.weight", (d, q_dim), Init.WRITER))
    return tensors


def _qk_norms(spec: ModelSpec, layer: int, t: Make) -> list[TensorPlan]:
    head = spec.layer_head_dim(layer)
    tensors = [t("attn_q_norm.weight", (head,), Init.ONES)]
    if spec.has_own_kv(layer):
        tensors.append(t("attn_k_norm.weight", (head,), Init.ONES))
    return tensors


def _delta_net(spec: ModelSpec, t: Make) -> list[TensorPlan]:
    """Gated DeltaNet (Qwen3.5, Qwen3-Next): Q and K over the key heads, V and the output
    gate over the value heads, a short convolution over Q, K and V, a per-head decay."""
    d, head = spec.n_embd, spec.ssm_d_state
    key_dim, value_dim = head * spec.ssm_n_group, head * spec.ssm_dt_rank
    conv_dim = 2 * key_dim + value_dim
    tensors = [
        t("attn_qkv.weight", (conv_dim, d), Init.MATRIX),
        t("attn_gate.weight", (value_dim, d), Init.MATRIX),
        t("ssm_conv1d.weight", (conv_dim, spec.ssm_d_conv), Init.CONV),
        t("ssm_dt.bias", (spec.ssm_dt_rank,), Init.ONES),
        t("ssm_a", (spec.ssm_dt_rank,), Init.HEAD_DECAY),
    ]
    if spec.arch == "qwen3next":
        tensors.append(t("ssm_ba.weight", (2 * spec.ssm_dt_rank, d), Init.MATRIX))
    else:
        tensors += [
            t("ssm_beta.weight", (spec.ssm_dt_rank, d), Init.MATRIX),
            t("ssm_alpha.weight", (spec.ssm_dt_rank, d), Init.MATRIX),
        ]
    return tensors + [
        t("ssm_norm.weight", (head,), Init.ONES),
        t("ssm_out.weight", (d, value_dim), Init.WRITER),
    ]


def _experts(spec: ModelSpec, t: Make) -> list[TensorPlan]:
    d, n, ff = spec.n_embd, spec.n_expert, spec.n_ff_exp
    return [
        t("ffn_gate_inp.weight", (n, d), Init.MATRIX),
        t("ffn_gate_exps.weight", (n, ff, d), Init.MATRIX),
        t("ffn_up_exps.weight", (n, ff, d), Init.MATRIX),
        t("ffn_down_exps.weight", (n, d, ff), Init.WRITER),
    ]


def _qwen(spec: ModelSpec, layer: int, t: Make) -> list[TensorPlan]:
    d = spec.n_embd
    tensors = [
        t("attn_norm.weight", (d,), Init.ONES),
        t("post_attention_norm.weight", (d,), Init.ONES),
    ]
    if spec.is_attention_layer(layer):
        tensors += _attention(spec, layer, t, q_factor=2) + _qk_norms(spec, layer, t)
    else:
        tensors += _delta_net(spec, t)
    if spec.arch == "qwen35":
        return tensors + _ffn(spec, t)[1:]  # the post-attention norm is its FFN norm
    return tensors + _experts(spec, t) + [
        t("ffn_gate_inp_shexp.weight", (d,), Init.MATRIX),
        t("ffn_gate_shexp.weight", (spec.n_ff_shexp, d), Init.MATRIX),
        t("ffn_up_shexp.weight", (spec.n_ff_shexp, d), Init.MATRIX),
        t("ffn_down_shexp.weight", (d, spec.n_ff_shexp), Init.WRITER),
    ]


def _gemma4(spec: ModelSpec, layer: int, t: Make) -> list[TensorPlan]:
    d = spec.n_embd
    global_without_v = spec.attention_k_eq_v and not spec.is_swa_layer(layer)
    tensors = [t("attn_norm.weight", (d,), Init.ONES)]
    tensors += _attention(spec, layer, t, v=not global_without_v) + _qk_norms(spec, layer, t)
    tensors += [t("post_attention_norm.weight", (d,), Init.ONES)] + _ffn(spec, t)
    tensors.append(t("post_ffw_norm.weight", (d,), Init.ONES))
    if spec.n_embd_per_layer:
        tensors += [
            t("inp_gate.weight", (spec.n_embd_per_layer, d), Init.MATRIX),
            t("proj.weight", (d, spec.n_embd_per_layer), Init.WRITER),
            t("post_norm.weight", (d,), Init.ONES),
        ]
    return tensors


def _gpt_oss(spec: ModelSpec, layer: int, t: Make) -> list[TensorPlan]:
    d, n, ff = spec.n_embd, spec.n_expert, spec.n_ff_exp
    return [
        t("attn_norm.weight", (d,), Init.ONES),
        t("post_attention_norm.weight", (d,), Init.ONES),
        *_attention(spec, layer, t),
        t("attn_output.bias", (d,), Init.ZEROS),
        t("attn_sinks.weight", (spec.n_head,), Init.NORMAL),
        *_experts(spec, t),
        t("ffn_gate_inp.bias", (n,), Init.ZEROS),
        t("ffn_gate_exps.bias", (n, ff), Init.ZEROS),
        t("ffn_up_exps.bias", (n, ff), Init.ZEROS),
        t("ffn_down_exps.bias", (n, d), Init.ZEROS),
    ]


def _mamba2_mixer(spec: ModelSpec, t: Make) -> list[TensorPlan]:
    d, inner, heads = spec.n_embd, spec.ssm_d_inner, spec.ssm_dt_rank
    conv_dim = inner + 2 * spec.ssm_n_group * spec.ssm_d_state
    return [
        t("ssm_in.weight", (inner + conv_dim + heads, d), Init.MATRIX),
        t("ssm_conv1d.weight", (conv_dim, spec.ssm_d_conv), Init.CONV),
        t("ssm_conv1d.bias", (conv_dim,), Init.ZEROS),
        t("ssm_dt.bias", (heads,), Init.SSM_DT_BIAS),
        t("ssm_a", (heads, 1), Init.HEAD_DECAY),
        t("ssm_d", (heads, 1), Init.ONES),
        t("ssm_norm.weight", (spec.ssm_n_group, inner // spec.ssm_n_group), Init.ONES),
        t("ssm_out.weight", (d, inner), Init.WRITER),
    ]


def _granitehybrid(spec: ModelSpec, layer: int, t: Make) -> list[TensorPlan]:
    tensors = [t("attn_norm.weight", (spec.n_embd,), Init.ONES)]
    if spec.is_attention_layer(layer):
        tensors += _attention(spec, layer, t)
    else:
        tensors += _mamba2_mixer(spec, t)
    return tensors + _ffn(spec, t)


def _mamba2(spec: ModelSpec, layer: int, t: Make) -> list[TensorPlan]:
    return [t("attn_norm.weight", (spec.n_embd,), Init.ONES), *_mamba2_mixer(spec, t)]


_BUILDERS: dict[str, Callable[[ModelSpec, int, Make], list[TensorPlan]]] = {
    "qwen35": _qwen,
    "qwen3next": _qwen,
    "gemma4": _gemma4,
    "gpt-oss": _gpt_oss,
    "granitehybrid": _granitehybrid,
    "mamba2": _mamba2,
}
