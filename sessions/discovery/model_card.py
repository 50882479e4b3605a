"""What the model list shows about a GGUF file, taken from its header alone.

A ``ModelCard`` answers the questions a user asks before loading a model (how big, which
quantisation, how much context, does it carry a chat template) and the one the engine
asks: which kind of memory it has, since that decides how its state is checkpointed.
A file that cannot be read still gets a card, with ``error`` saying why, so the list can
show it instead of silently leaving it out.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from sessions.discovery.abort_checks import header_problem
from sessions.discovery.ggml_types import file_type_name, tensor_type_name
from sessions.discovery.gguf_header import GGUFHeader, ModelFileError, read_gguf_header
from sessions.discovery.memory_words import memory_words
from sessions.memory_kind import MemoryKind
from sessions.sampling_presets import from_file

# From llama.cpp's llm_arch_is_recurrent / llm_arch_is_hybrid (src/llama-arch.cpp, 0.3.36).
RECURRENT_ARCHITECTURES = frozenset({"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})
HYBRID_ARCHITECTURES = frozenset({
    "jamba", "falcon-h1", "plamo2", "granitehybrid", "lfm2", "lfm2moe", "nemotron_h",
    "nemotron_h_moe", "qwen3next", "kimi-linear", "bailingmoe3", "kimi-k3", "glm5-next",
    "qwen35", "qwen35moe", "qwen4exp", "deepseek4", "minimax-01",
})
AUXILIARY_TYPES = frozenset({"adapter", "mmproj", "imatrix"})
EMBEDDING_ARCHITECTURES = frozenset({
    "bert", "modern-bert", "nomic-bert", "nomic-bert-moe", "neo-bert", "jina-bert-v2", "jina-bert-v3",
    "eurobert", "gemma-embedding", "t5encoder",
})
"""llama.cpp's encoder-only architectures (src/llama-arch.cpp): they make embeddings, not text."""
MAX_SPLITS = 65535
"""llama.cpp reads ``split.count`` as a ``uint16_t`` (src/llama-model-loader.cpp)."""
_SPLIT_NAME = re.compile(r"^(?P<prefix>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)


def memory_kind_for(architecture: str | None, sliding_window: int | None) -> MemoryKind:
    """The kind of memory llama.cpp gives a model of this architecture."""
    if architecture in RECURRENT_ARCHITECTURES:
        return MemoryKind.RECURRENT
    if architecture in HYBRID_ARCHITECTURES:
        return MemoryKind.HYBRID
    if sliding_window:
        return MemoryKind.SWA
    return MemoryKind.PLAIN


@dataclass(frozen=True)
class ModelCard:
    """One model file as the model list shows it."""

    path: Path
    name: str
    """``general.name``, else the file name without extension (and split suffix)."""
    file_size: int = 0
    """Bytes on disk; for a split model, all parts found together."""
    architecture: str | None = None
    parameter_count: int | None = None
    """``general.parameter_count``, else the sum of tensor sizes in the tensor table."""
    quantization: str | None = None
    """``general.file_type`` as a name (``Q4_K_M``), else the most common tensor type."""
    context_length: int | None = None
    """The trained context length, ``<arch>.context_length``."""
    memory_kind: MemoryKind | None = None
    memory_label: str | None = None
    """The memory in a few words a user knows ("hybrid: DeltaNet + attention")."""
    sliding_window: int | None = None
    has_chat_template: bool = False
    model_type: str | None = None
    """``general.type``: ``model`` (or unset) for a chat model, ``adapter``, ``mmproj``..."""
    embedding: bool = False
    """An embedding model: an encoder-only architecture, or a pooling layer (``<arch>.pooling_type``
    mean, cls, last or rank), which a model converted for embeddings or reranking carries."""
    tensor_count: int = 0
    """Tensors in the file; for a split model, in all parts found together."""
    split_index: int = 0
    """0-based part number of a split model (``split.no``); 0 for a single file."""
    split_count: int = 1
    missing_parts: tuple[str, ...] = ()
    """File names of the other parts of a split model that are not beside this one."""
    sampling: tuple[tuple[str, float | int], ...] = ()
    """The sampling settings the file recommends (``general.sampling.*``), as (setting, value)."""
    source: str = ""
    """Where it was found: ``config``, ``huggingface``, ``lmstudio``, ``llama.cpp``..."""
    error: str | None = None
    """Why the file cannot be used; None for a usable model."""
    checkpoint_problem: str | None = None
    """Why its last load ran it without checkpoints (``layout_checks``); None when it had
    them or was not loaded as it is now."""

    @property
    def readable(self) -> bool:
        return self.error is None

    @property
    def is_auxiliary(self) -> bool:
        """Not a model to chat with: an adapter, a vision projector, an embedding model, or
        vocabulary only."""
        if self.model_type in AUXILIARY_TYPES or self.architecture == "clip" or self.embedding:
            return True
        return self.readable and self.tensor_count == 0

    @property
    def is_split(self) -> bool:
        return self.split_count > 1

    @classmethod
    def unreadable(cls, path: Path, reason: str, source: str = "") -> ModelCard:
        try:
            size = path.stat().st_size
        except OSError:
            size = 0
        return cls(path=path, name=_base_name(path), file_size=size, source=source, error=reason)

    def with_source(self, source: str) -> ModelCard:
        return replace(self, source=source)


def _base_name(path: Path) -> str:
    split = _SPLIT_NAME.match(path.name)
    return split.group("prefix") if split else path.stem


def _dominant_type(header: GGUFHeader) -> str | None:
    weights: Counter[int] = Counter()
    for tensor in header.tensors:
        if len(tensor.shape) >= 2:
            weights[tensor.type_id] += tensor.n_elements
    if not weights:
        for tensor in header.tensors:
            weights[tensor.type_id] += tensor.n_elements
    return tensor_type_name(weights.most_common(1)[0][0]) if weights else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def later_parts(path: Path) -> list[Path]:
    """Parts 2..n of the split model whose first part is ``path``, from its name alone, as
    llama.cpp finds them; empty for a single file, a later part, or an impossible count."""
    split = _SPLIT_NAME.match(path.name)
    if split is None or int(split.group("no")) != 1:
        return []
    try:
        return split_part_paths(path, int(split.group("count")))[1:]
    except ModelFileError:  # more parts than llama.cpp takes: it refuses the model
        return []


def split_problem(path: Path, count: object, index: object = 0) -> str | None:
    """Why ``split.count``/``split.no`` cannot describe the file named ``path``, or None.

    The parts of a split model are found from the file name and the count, so a forged
    count would have the list build (and stat) that many paths: 2**40 never ends. llama.cpp
    itself takes at most 65,535 parts and finds the others only when the first one's name
    ends in ``-00001-of-NNNNN.gguf`` with NNNNN its ``split.count``.
    """
    if count is None:
        return None
    parts = _int(count)
    if parts is None or not 1 <= parts <= MAX_SPLITS:
        return f"split.count is {count!r} (llama.cpp allows 1 to {MAX_SPLITS:,} parts)"
    split = _SPLIT_NAME.match(path.name)
    if parts == 1 and not split:
        return None
    if not split or int(split.group("count")) != parts:
        return (f"split.count is {parts}, but the file name does not end in "
                f"-NNNNN-of-{parts:05d}.gguf as llama.cpp needs to find the other parts")
    number = _int(index)
    if number is None or number + 1 != int(split.group("no")):
        return f"split.no is {index!r}, but the file name says part {int(split.group('no'))}"
    return None


def split_part_paths(path: Path, count: int) -> list[Path]:
    """The file names llama.cpp gives the parts of a split model, beside ``path``.

    ``ModelFileError`` when ``count`` cannot be a part count for this name (see
    ``split_problem``): callers pass a count read from a file, which may be forged.
    """
    split = _SPLIT_NAME.match(path.name)
    parts = _int(count)
    if parts is None or not 1 <= parts <= MAX_SPLITS \
            or (split is not None and int(split.group("count")) != parts):
        raise ModelFileError(f"{path.name}: invalid split model: {split_problem(path, count, None)}")
    if not split:
        return [path]
    prefix = split.group("prefix")
    return [path.with_name(f"{prefix}-{no:05d}-of-{count:05d}.gguf") for no in range(1, count + 1)]


def card_from_header(path: Path, header: GGUFHeader) -> ModelCard:
    """The card of one file from its parsed header (split parts are not looked at)."""
    meta = header.metadata
    arch = meta.get("general.architecture")
    arch = arch if isinstance(arch, str) else None
    name = meta.get("general.name")
    sliding = _int(meta.get(f"{arch}.attention.sliding_window")) if arch else None
    file_type = _int(meta.get("general.file_type"))
    quantization = file_type_name(file_type) if file_type is not None else None
    params = _int(meta.get("general.parameter_count"))
    model_type = meta.get("general.type")
    kind = memory_kind_for(arch, sliding)
    return ModelCard(
        path=path,
        name=name.strip() if isinstance(name, str) and name.strip() else _base_name(path),
        file_size=header.file_size,
        architecture=arch,
        parameter_count=params if params else (sum(t.n_elements for t in header.tensors) or None),
        quantization=quantization or _dominant_type(header),
        context_length=_int(meta.get(f"{arch}.context_length")) if arch else None,
        memory_kind=kind,
        memory_label=memory_words(kind, arch, meta),
        sliding_window=sliding or None,
        has_chat_template=any(key.split(".")[:2] == ["tokenizer", "chat_template"] for key in meta),
        model_type=model_type if isinstance(model_type, str) else None,
        embedding=arch in EMBEDDING_ARCHITECTURES or (_int(meta.get(f"{arch}.pooling_type")) or 0) > 0,
        tensor_count=len(header.tensors),
        split_index=_int(meta.get("split.no")) or 0,
        split_count=max(_int(meta.get("split.count")) or 1, 1),
        sampling=tuple(from_file(meta).items()),
    )


def _check_complete(path: Path, header: GGUFHeader) -> None:
    end = header.data_end()
    if header.tensors and end is not None and end > header.file_size:
        raise ModelFileError(
            f"{path.name}: incomplete file ({header.file_size:,} of {end:,} bytes; "
            "an unfinished download?)")


def read_model_card(path: Path | str) -> ModelCard:
    """Read the header of ``path`` and describe the model; raises ``ModelFileError``.

    For the first part of a split model the card covers every part found beside it
    (sizes and tensors added up); missing parts are listed and make the card an error.
    """
    return card_and_header(path)[0]


def card_and_header(path: Path | str) -> tuple[ModelCard, GGUFHeader]:
    """``read_model_card`` and the parsed header of ``path`` it was made from."""
    path = Path(path).expanduser()
    header = read_gguf_header(path)
    return _card(path, header), header


def _card(path: Path, header: GGUFHeader) -> ModelCard:
    _check_complete(path, header)
    split = split_problem(path, header.get("split.count"), header.get("split.no", 0))
    if split is not None:
        raise ModelFileError(f"{path.name}: invalid split model: {split}")
    card = card_from_header(path, header)
    problem = header_problem(header)
    if problem is not None:
        return replace(card, error=f"invalid model file: {problem}; llama.cpp would crash on it")
    if not card.is_split or card.split_index != 0:
        return card
    size, missing, tensors = card.file_size, [], card.tensor_count
    summed = _int(header.get("general.parameter_count")) is None
    params = sum(t.n_elements for t in header.tensors)
    for part in split_part_paths(path, card.split_count)[1:]:
        if not part.is_file():
            missing.append(part.name)
            continue
        part_header = read_gguf_header(part)
        _check_complete(part, part_header)
        size += part_header.file_size
        tensors += len(part_header.tensors)  # part 1 may hold none (--no-tensor-first-split)
        params += sum(t.n_elements for t in part_header.tensors)
    error = None
    if missing:
        error = (f"split model: {len(missing)} of {card.split_count} parts missing "
                 f"({', '.join(missing)})")
    return replace(card, file_size=size, missing_parts=tuple(missing), error=error, tensor_count=tensors,
                   parameter_count=(params or None) if summed else card.parameter_count)
