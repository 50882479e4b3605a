"""Writing made models to disk, once per set of parameters.

A made model is a pure function of its parameters, so it is cached under a name that
hashes all of them together with ``FORMAT_REVISION``: a second request returns the file
already made, and a change to the maker (bump the revision) can never be mistaken for an
old file. Files are written to a temporary name in the same folder and renamed into place,
so several processes (parallel test workers, a benchmark and the app) asking for the same
model at once each see either no file or a complete one.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..durable import TEMP_SUFFIX, replacing
from ..paths import ensure_private_dir, made_models_dir
from . import tensors
from .archs import ModelSpec, hashed_fields, model_spec
from .errors import SynthError
from .metadata import metadata
from .vocab import build_vocab, marker_style
from .weights import fill, weights_revision

if TYPE_CHECKING:
    import gguf

FORMAT_REVISION = 4
"""Bump whenever the bytes the maker writes for the same parameters change (a change to one
architecture's weights alone can go in ``weights.WEIGHTS_REVISIONS`` instead)."""

ABANDONED_AFTER_SECONDS = 3600
"""A temporary file this old belongs to a maker that died (a bench model takes seconds)."""


def make_model(
    arch: str,
    size: str = "tiny",
    *,
    swa_window: int | None = None,
    seed: int = 0,
    n_ctx_train: int = 8192,
    chat_template: str | None = None,
    markers: str = "chatml",
) -> Path:
    """The path of the made model with these parameters, making it if needed.

    ``size`` is ``tiny``, ``bench``, ``gpu`` or a real model's shape of this architecture
    (``shapes.SHAPES``). ``swa_window`` only matters for windowed architectures (None: their
    default, see ``archs.DEFAULT_WINDOWS``). ``markers`` picks the vocabulary's chat
    control tokens (``vocab.MARKER_STYLES``: ChatML by default, ``gemma``, ``llama3``, or
    ``none`` for a base model); only ChatML comes with a template. ``chat_template``
    replaces the style's template (to test how a model's own, possibly hostile, template is
    handled), and ``""`` leaves the template out of the file. Raises ``SynthError`` for a
    bad request.
    """
    spec = model_spec(arch, size, swa_window=swa_window, n_ctx_train=n_ctx_train)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SynthError(f"the seed must be a whole number of at least 0, not {seed!r}")
    marker_style(markers)
    digest = model_hash(spec, seed, chat_template, markers)
    path = made_models_dir() / f"{spec.arch}-{spec.size}-{digest}.gguf"
    if path.is_file():
        return path
    ensure_private_dir(path.parent)
    _sweep_abandoned(path)
    with replacing(path) as temp:
        _write(spec, seed, temp, chat_template, markers)
    return path


def _sweep_abandoned(path: Path) -> None:
    """Remove temporary files a killed maker left behind (old enough to be nobody's)."""
    cutoff = time.time() - ABANDONED_AFTER_SECONDS
    for stale in path.parent.glob(f".{path.name}.*{TEMP_SUFFIX}"):
        try:
            if stale.stat().st_mtime < cutoff:
                stale.unlink()
        except OSError:
            pass


def model_hash(spec: ModelSpec, seed: int, chat_template: str | None = None,
               markers: str = "chatml") -> str:
    """A short digest of everything that decides the file's bytes."""
    fields: dict[str, object] = {"revision": FORMAT_REVISION, "seed": seed, "spec": hashed_fields(spec)}
    # Each of these is absent at its default, so the names of earlier files stay valid.
    if revision := weights_revision(spec.arch):
        fields["weights_revision"] = revision
    if chat_template is not None:
        fields["chat_template"] = chat_template
    if chat_template == "":  # an empty template once meant an empty key; now no key at all
        fields["template_key"] = "absent"
    if markers != "chatml":
        fields["markers"] = markers
    key = json.dumps(fields, sort_keys=True)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def param_count(arch: str, size: str = "tiny", *, swa_window: int | None = None) -> int:
    """How many weights the model would hold, computed without making it."""
    return tensors.param_count(model_spec(arch, size, swa_window=swa_window))


def _write(spec: ModelSpec, seed: int, path: Path, chat_template: str | None = None,
           markers: str = "chatml") -> None:
    # Deferred: gguf and numpy load only when a model is written.
    import gguf
    import numpy as np

    vocab = build_vocab(spec.vocab_size, markers)
    writer = gguf.GGUFWriter(path, spec.arch)
    writer.add_name(f"llamachat made {spec.arch} {spec.size}")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16 if spec.weights_f16 else gguf.LlamaFileType.ALL_F32)
    for key, value in metadata(spec):
        _add_value(writer, key, value)

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(list(vocab.tokens))
    writer.add_token_types(list(vocab.token_types))
    writer.add_token_merges(list(vocab.merges))
    writer.add_bos_token_id(vocab.bos_id)
    writer.add_eos_token_id(vocab.eos_id)
    writer.add_eot_token_id(vocab.eot_id)
    writer.add_pad_token_id(vocab.pad_id)
    writer.add_add_bos_token(False)
    template = vocab.chat_template if chat_template is None else chat_template
    if template:
        writer.add_chat_template(template)

    plan = tensors.tensor_plan(spec)
    for tensor in plan:
        dtype = np.dtype(np.float16 if tensor.f16 else np.float32)
        writer.add_tensor_info(tensor.name, tensor.shape, dtype, tensor.n_elements * dtype.itemsize)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    rng = np.random.Generator(np.random.PCG64(seed))
    silenced, chat_markers = vocab.never_predicted(), vocab.chat_markers()
    for tensor in plan:
        writer.write_tensor_data(fill(tensor, spec, silenced, chat_markers, rng))
    writer.close()


def _add_value(writer: gguf.GGUFWriter, key: str, value: object) -> None:
    if isinstance(value, bool):
        writer.add_bool(key, value)
    elif isinstance(value, int):
        writer.add_uint32(key, value)
    elif isinstance(value, float):
        writer.add_float32(key, value)
    elif isinstance(value, str):
        writer.add_string(key, value)
    elif isinstance(value, tuple):
        writer.add_array(key, list(value))
    else:
        raise TypeError(f"no GGUF type for metadata {key}={value!r}")
