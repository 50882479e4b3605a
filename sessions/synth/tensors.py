"""Which tensors each made model holds, with their shapes and how to fill them.

The names and shapes mirror the ``create_tensor`` calls of llama.cpp's loader for each
architecture (vendored ``src/models/<arch>.cpp``); the per-layer ones are in ``layers.py``.
llama.cpp refuses a file with a tensor it did not ask for, so optional tensors are written
only where the loader creates them. Shapes here are in numpy order, the reverse of ggml's
``{ne0, ne1}``: a projection from ``n_in`` to ``n_out`` features is ``(n_out, n_in)``.
Knowing the plan without any weights lets ``param_count`` size a model without making it.
"""

from __future__ import annotations

from .archs import ModelSpec
from .layers import layer_tensors
from .plan import MATRICES, Init, TensorPlan

__all__ = ["Init", "TensorPlan", "param_count", "tensor_plan"]


def tensor_plan(spec: ModelSpec) -> list[TensorPlan]:
    """All tensors of the model, in file order."""
    d, v = spec.n_embd, spec.vocab_size
    output_norm = "token_embd_norm.weight" if spec.arch == "lfm2" else "output_norm.weight"
    plan = [
        TensorPlan("token_embd.weight", (v, d), Init.EMBED),
        TensorPlan(output_norm, (d,), Init.ONES),
        TensorPlan("output.weight", (v, d), Init.OUTPUT),
    ]
    if spec.arch == "gemma4":
        plan += _gemma4_globals(spec)
    for layer in range(spec.n_layer):
        plan += layer_tensors(spec, layer)
    if spec.weights_f16:
        plan = [
            TensorPlan(t.name, t.shape, t.init, f16=True) if t.init in MATRICES else t for t in plan
        ]
    return plan


def _gemma4_globals(spec: ModelSpec) -> list[TensorPlan]:
    plan = []
    if spec.n_embd_per_layer:
        width = spec.n_embd_per_layer * spec.n_layer
        plan += [
            TensorPlan("per_layer_token_embd.weight", (spec.vocab_size, width), Init.PER_LAYER_EMBED),
            TensorPlan("per_layer_model_proj.weight", (width, spec.n_embd), Init.MATRIX),
            TensorPlan("per_layer_proj_norm.weight", (spec.n_embd_per_layer,), Init.ONES),
        ]
    # One tensor for every global layer (the loader marks the later uses duplicates).
    plan.append(TensorPlan("rope_freqs.weight", (spec.head_dim // 2,), Init.PROPORTIONAL_ROPE))
    return plan


def param_count(spec: ModelSpec) -> int:
    """The number of weights the model file holds (what llama.cpp reports as n_params)."""
    return sum(t.n_elements for t in tensor_plan(spec))
