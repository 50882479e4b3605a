"""The description of one tensor of a made model: its name, shape and how it is filled."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from math import prod


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
    HEAD_DECAY = "head_decay"
    """Mamba-2 and DeltaNet's per-head ``A`` (stored as ``-A``, each head its own decay)."""
    NORMAL = "normal"
    """Unit normal values (attention sinks: one logit per head)."""
    PER_LAYER_EMBED = "per_layer_embed"
    """Gemma 4's per-layer token embeddings (the graph scales them by sqrt of their width)."""
    PROPORTIONAL_ROPE = "proportional_rope"
    """Gemma 4's global-layer frequency factors: a quarter of the pairs rotate, the rest not."""


MATRICES = (Init.EMBED, Init.OUTPUT, Init.MATRIX, Init.WRITER, Init.PER_LAYER_EMBED)
"""Kinds stored in F16 in the F16 sizes (the rest, norms and SSM parameters, stay F32)."""


@dataclass(frozen=True)
class TensorPlan:
    name: str
    shape: tuple[int, ...]
    init: Init
    f16: bool = False

    @property
    def n_elements(self) -> int:
        return prod(self.shape)
