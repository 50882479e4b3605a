"""The values in a GGUF header that make llama.cpp abort the whole process, read from the header.

llama.cpp checks some of a model's numbers with ``GGML_ASSERT`` (or not at all, and
crashes later), which ends the program instead of failing the load. Each check here
names the abort it prevents. Two kinds matter:

- aborts while loading (``llama_model_base::load_hparams``): a block count outside
  1..512 and more "next-token" layers than layers; the trial load in a child process
  (``probe``) would catch these too, the header check only says it sooner and in words;
- aborts in the compute kernels of the first decode (``ggml-cpu/ops.cpp``), which pass
  loading and building the graph: a NaN, negative or zero norm epsilon (``eps >= 0``
  in norm and rms_norm), a rope dimension count that is odd or wider than a head
  (``n_dims % 2 == 0``, ``n_dims <= ne0`` in rope), multi-rope sections all zero. The
  trial load reads no tensor data and so decodes nothing: these checks are the only
  thing that stops these files, and a new kernel assertion on a model value belongs here.

Score or type lists of another length than the vocabulary are read past their end
without an assertion; they are refused here too.
"""

from __future__ import annotations

import math

from sessions.discovery.gguf_header import ArrayInfo, GGUFHeader

MAX_LAYERS = 512
"""``LLAMA_MAX_LAYERS`` (src/llama-hparams.h): llama.cpp aborts on a block count outside 1..512."""

EPSILONS = ("layer_norm_rms_epsilon", "layer_norm_epsilon")
"""The ``<arch>.attention.*`` norm epsilons; the norm and rms_norm kernels assert ``eps >= 0`` at the
first decode (l2_norm's epsilon is a constant in llama.cpp's graphs, not a model value)."""


def header_problem(header: GGUFHeader) -> str | None:
    """A value in the header that makes llama.cpp abort the whole process, in words, or None."""
    meta = header.metadata
    for key, value in meta.items():
        # A NaN passes every comparison llama.cpp makes while loading, and fails the first
        # kernel that asserts on it; no float in a header has a use for NaN or infinity.
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, float) and not math.isfinite(v) for v in values):
            return f"{key} is {value!r}, not a number a model can use"
    arch = meta.get("general.architecture")
    if isinstance(arch, str):
        problem = _layers_problem(meta, arch) or _epsilon_problem(meta, arch) or _rope_problem(meta, arch)
        if problem is not None:
            return problem
    n_tokens = _length(meta.get("tokenizer.ggml.tokens"))
    for key in ("tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        n = _length(meta.get(key))
        if n_tokens is not None and n is not None and n != n_tokens:
            return f"{key} has {n} entries for {n_tokens} tokens"
    return None


def _layers_problem(meta: dict, arch: str) -> str | None:
    """``GGML_ASSERT(n_layer_all > 0 && n_layer_all <= LLAMA_MAX_LAYERS)`` and the next-token layers' count."""
    blocks = meta.get(f"{arch}.block_count")
    if blocks is not None and not (_int(blocks) is not None and 1 <= blocks <= MAX_LAYERS):
        return f"{arch}.block_count is {blocks!r} (a model has 1 to {MAX_LAYERS} layers)"
    nextn = _int(meta.get(f"{arch}.nextn_predict_layers"))
    if nextn is not None and blocks is not None and nextn > blocks:
        return f"{arch}.nextn_predict_layers ({nextn}) is more than its {blocks} layers"
    return None


def _epsilon_problem(meta: dict, arch: str) -> str | None:
    """The norm kernels' ``GGML_ASSERT(eps >= 0.0f)``, met only at the first decode."""
    for name in EPSILONS:
        eps = meta.get(f"{arch}.attention.{name}")
        if eps is not None and not (isinstance(eps, (int, float)) and 0 < eps < 1):
            return f"{arch}.attention.{name} is {eps!r} (it must be a small positive number)"
    return None


def _rope_problem(meta: dict, arch: str) -> str | None:
    """The rope kernel's ``n_dims % 2 == 0`` and ``n_dims <= ne0``, met only at the first decode.

    ``ne0`` is the head size: ``<arch>.attention.key_length`` (``key_length_swa`` for the
    sliding-window layers), by default the embedding length over the first layer's head
    count, as llama.cpp's loader works it out.
    """
    head = _head_size(meta, arch)
    head_swa = _int(meta.get(f"{arch}.attention.key_length_swa")) or head
    for key, width in (("dimension_count", head), ("dimension_count_swa", head_swa)):
        n_dims = meta.get(f"{arch}.rope.{key}")
        if n_dims is None:
            continue
        if _int(n_dims) is None or n_dims < 0 or n_dims % 2:
            return f"{arch}.rope.{key} is {n_dims!r} (it must be an even number)"
        if width is not None and n_dims > width:
            return f"{arch}.rope.{key} ({n_dims}) is wider than an attention head ({width})"
    sections = meta.get(f"{arch}.rope.dimension_sections")
    if isinstance(sections, list) and sections and not any(isinstance(s, int) and s > 0 for s in sections[:3]):
        return f"{arch}.rope.dimension_sections is {sections!r} (one of the first three must be positive)"
    return None


def _head_size(meta: dict, arch: str) -> int | None:
    key_length = _int(meta.get(f"{arch}.attention.key_length"))
    if key_length is not None:
        return key_length
    embd = _int(meta.get(f"{arch}.embedding_length"))
    heads = meta.get(f"{arch}.attention.head_count")
    first = _int(heads[0] if isinstance(heads, list) and heads else heads)
    return embd // first if embd is not None and first else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _length(value: object) -> int | None:
    if isinstance(value, ArrayInfo):
        return value.length
    return len(value) if isinstance(value, list) else None
