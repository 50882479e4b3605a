"""Random weights that keep a made model numerically sane.

The made models only have to produce finite, deterministic and varied numbers, but
plain noise is not enough for that:

- Every projection is drawn with standard deviation ``1/sqrt(fan_in)`` so each layer
  roughly preserves the scale of its input; activations stay near 1 at any depth and
  every layer mixes in enough context that greedy decoding wanders instead of repeating
  one token.
- Most of the vocabulary of a ``bench`` model is reserved padding. With random output
  rows, sampling would pick those (empty) tokens most of the time, and byte tokens would
  write control characters and broken UTF-8. Real models learn never to predict such ids;
  here the same effect comes from a *bias channel*: channel 0 of every token embedding
  holds a constant, no layer ever writes into that channel, so after the final norm it is
  a positive number for every position. The output rows of never-predicted tokens read
  only that channel, with a large negative weight; all other rows ignore it.
- A made model cannot know where a reply ends, so its chat markers (``<|im_end|>``...)
  would be as likely as any word, and since the state the generation prompt leaves hardly
  depends on the question, one unlucky draw makes a model end nearly every reply before
  its first word. Real models never do; here the markers' output rows read the bias
  channel with a small negative weight (``MARKER_LEAN``), so that takes a far rarer draw.
- Mamba's state matrix ``A`` is stored as ``-exp(A_log)`` (negative, so the state decays)
  and its time-step bias as the inverse softplus of small steps, as in the reference
  initialisation. Mamba-2 and DeltaNet have one ``A`` per head, drawn as their reference
  code draws it, so some heads forget within a few tokens and others remember long.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .plan import Init, TensorPlan

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np

    from .archs import ModelSpec

BIAS_CHANNEL_VALUE = 4.0
"""Channel 0 of every input embedding (other channels have unit scale)."""

SILENCE_WEIGHT = 4.0
"""Weight of the bias channel in never-predicted tokens' output rows, per unit of residual
scale (see ``_bias_row_weight``): their logits end up far below every real token's."""

_GEMMAS = frozenset({"gemma3", "gemma4"})
_DELTA_NET = frozenset({"qwen35", "qwen3next"})

LOGIT_STD = 2.0
"""Typical spread of real tokens' logits: peaked enough to sample words, never one-hot."""

MARKER_LEAN = 2 * LOGIT_STD / BIAS_CHANNEL_VALUE
"""Weight of the bias channel in chat markers' output rows, per unit of residual scale: their
logits sit about two ``LOGIT_STD`` below a word's. The best of some hundred words is about
three spreads above their mean, so a marker tops it only by a five-spread draw instead of a
three-spread one. A made reply still ends by its length far more often than by a marker."""

WEIGHTS_REVISIONS = {"qwen35": 1}
"""Changes to an architecture's weights since ``maker.FORMAT_REVISION`` was last raised, which
the cache key adds for the architectures listed, so that every other file keeps its name and
bytes. 1: chat markers lean (``MARKER_LEAN``). Raising ``FORMAT_REVISION`` folds them into
every architecture and empties this."""


def weights_revision(arch: str) -> int:
    return WEIGHTS_REVISIONS.get(arch, 0)


def fill(plan: TensorPlan, spec: ModelSpec, silenced: Sequence[int], markers: Sequence[int],
         rng: np.random.Generator) -> np.ndarray:
    """The values of one tensor, as float32 or float16 according to the plan.

    ``silenced`` lists the token ids the model must (almost) never predict, ``markers`` the
    chat control tokens.
    """
    # Deferred: numpy loads only when a model is written.
    import numpy as np

    shape, init = plan.shape, plan.init
    if init is Init.ONES:
        values = np.ones(shape, dtype=np.float32)
    elif init is Init.ZEROS:
        values = np.zeros(shape, dtype=np.float32)
    elif init is Init.SSM_A:
        values = -np.broadcast_to(np.arange(1, shape[1] + 1, dtype=np.float32), shape).copy()
    elif init is Init.SSM_DT_BIAS:
        dt = np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), size=shape)).astype(np.float32)
        values = (dt + np.log(-np.expm1(-dt))).astype(np.float32)
    elif init is Init.HEAD_DECAY:
        low = 0.1 if spec.arch in _DELTA_NET else 1.0  # DeltaNet draws A in (0, 16), Mamba-2 in [1, 16]
        values = -rng.uniform(low, 16.0, size=shape).astype(np.float32)
    elif init is Init.NORMAL:
        values = rng.standard_normal(shape, dtype=np.float32)
    elif init is Init.PER_LAYER_EMBED:
        values = rng.standard_normal(shape, dtype=np.float32) * np.float32(spec.n_embd_per_layer**-0.5)
    elif init is Init.PROPORTIONAL_ROPE:
        # A factor of 1e30 makes a pair's angle vanish (llama.cpp's conversion writes the same).
        values = np.full(shape, 1e30, dtype=np.float32)
        values[: shape[0] // 4] = 1.0
    elif init is Init.EMBED:
        # Gemma multiplies input embeddings by sqrt(n_embd); keep its residual at unit scale.
        scale = spec.n_embd ** -0.5 if spec.arch in _GEMMAS else 1.0
        values = rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)
        values[:, 0] = BIAS_CHANNEL_VALUE * scale
    elif init is Init.OUTPUT:
        values = rng.standard_normal(shape, dtype=np.float32) * np.float32(LOGIT_STD / spec.n_embd**0.5)
        values[:, 0] = 0.0
        values[silenced, :] = 0.0
        values[silenced, 0] = -_bias_row_weight(spec, SILENCE_WEIGHT)
        if weights_revision(spec.arch) >= 1:
            values[markers, 0] = -_bias_row_weight(spec, MARKER_LEAN)
    else:  # MATRIX, WRITER, CONV: unit gain over the last (input) axis
        values = rng.standard_normal(shape, dtype=np.float32) * np.float32(shape[-1] ** -0.5)
        if init is Init.WRITER:  # output channel 0 (the second-to-last axis) stays zero
            values[..., 0, :] = 0.0
    return values.astype(np.float16) if plan.f16 else values


def _bias_row_weight(spec: ModelSpec, weight: float) -> float:
    """``weight`` per unit of residual scale, for this model. The final norm divides the bias
    channel by the residual's RMS, which grows with depth: Gemma adds two unit-RMS (post-normed)
    vectors per layer (Gemma 4 a third with per-layer embeddings), the others about one."""
    growth = 1
    if spec.arch in _GEMMAS:
        growth = 3 if spec.n_embd_per_layer else 2
    return weight * (1 + growth * spec.n_layer) ** 0.5
