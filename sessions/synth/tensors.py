"""Which tensors each made model holds, with their shapes and how to fill them.

The names and shapes mirror the ``create_tensor`` calls of llama.cpp's loader for each
architecture (vendored ``src/models/<arch>.cpp``). Shapes here are in numpy order, the
reverse of ggml's ``{ne0, ne1}``: a projection from ``n_in`` to ``n_out`` features is
``(n_out, n_in)``. Knowing the plan without any weights lets ``param_count`` size a model
without making it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from math import prod

from .archs import ModelSpec


class Init(Enum):
    """How a tensor is filled (see ``weights.fill``)."""

    EMBED = "embed"
    OUTPUT = "output"
    MATRIX = "matrix"
    WRITER = "writer"
    """A projection that adds into the residual stream: it never writes the bias channel."""
    CONV = "conv"
    ONES = "ones"
    ZEROS = "zeros"
    SSM_A = "ssm_a"
    SSM_DT_BIAS = "ssm_dt_bias"


_MATRICES = (Init.EMBED, Init.OUTPUT, Init.MATRIX, Init.WRITER)


@dataclass(frozen=True)
class TensorPlan:
    name: str
    shape: tuple[int, ...]
    init: Init
    f16: bool = False

    @property
    def n_elements(self) -> int:
        return prod(self.shape)


def tensor_plan(spec: ModelSpec) -> list[TensorPlan]:
    """All tensors of the model, in file order."""
    d, v = spec.n_embd, spec.vocab_size
    output_norm = "token_embd_norm.weight" if spec.arch == "lfm2" else "output_norm.weight"
    plan = [
        TensorPlan("token_embd.weight", (v, d), Init.EMBED),
        TensorPlan(output_norm, (d,), Init.ONES),
        TensorPlan("output.weight", (v, d), Init.OUTPUT),
    ]
    for layer in range(spec.n_layer):
        plan += _layer(spec, layer)
    if spec.weights_f16:
        plan = [
            TensorPlan(t.name, t.shape, t.init, f16=True) if t.init in _MATRICES else t for t in plan
        ]
    return plan


def param_count(spec: ModelSpec) -> int:
    """The number of weights the model file holds (what llama.cpp reports as n_params)."""
    return sum(t.n_elements for t in tensor_plan(spec))


def _layer(spec: ModelSpec, layer: int) -> list[TensorPlan]:
    def t(name: str, shape: tuple[int, ...], init: Init) -> TensorPlan:
        return TensorPlan(f"blk.{layer}.{name}", shape, init)

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
    tensors += [
        t("ffn_norm.weight", (d,), Init.ONES),
        t("ffn_gate.weight", (spec.n_ff, d), Init.MATRIX),
        t("ffn_up.weight", (spec.n_ff, d), Init.MATRIX),
        t("ffn_down.weight", (d, spec.n_ff), Init.WRITER),
    ]
    if spec.arch == "gemma3":
        tensors.append(t("post_ffw_norm.weight", (d,), Init.ONES))
    return tensors
