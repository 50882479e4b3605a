"""A loaded GGUF model: weights, vocabulary and what kind of memory it needs.

Wraps the low-level ``llama_model`` because the high-level ``Llama`` class cannot save
and restore partial sequence state, which is the whole point of the engine. Load errors
are turned into ``ModelLoadError`` with plain words: llama.cpp itself only returns NULL.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sessions.discovery import ModelFileError, check_before_load
from sessions.errors import LlamachatError
from sessions.llama.fingerprint import model_fingerprint
from sessions.llama.native import held_errors, lib, log_lines
from sessions.llama.placement import Placement, PlacementLog
from sessions.llama.state_blob import CELL_EXT_BYTES, StateLayout
from sessions.llama.vocab_markers import special_token_texts
from sessions.memory_kind import MemoryKind


class ModelLoadError(LlamachatError):
    """The model file could not be loaded; the message says why in plain words."""


@dataclass(frozen=True)
class ModelInfo:
    path: Path
    fingerprint: str
    name: str
    architecture: str
    n_params: int
    n_vocab: int
    n_ctx_train: int
    n_swa: int
    kind: MemoryKind
    chat_template: str | None
    bos_text: str
    eos_text: str
    add_bos: bool
    size_bytes: int


LoadProgressFn = Callable[[float], "bool | None"]
"""Fraction of the file loaded; returning False stops the load."""


def _check_file(path: Path) -> None:
    """Refuse what llama.cpp would refuse, but with a reason a person can act on.

    The header reader checks the magic, the version, every header field and that the
    file is as long as its tensor table says (a partly downloaded file is the usual
    case); llama.cpp itself would only say it failed.
    """
    if not path.exists():
        raise ModelLoadError(f"model file not found: {path}")
    if not path.is_file():
        raise ModelLoadError(f"not a file: {path}")
    try:
        check_before_load(path)  # also what would make llama.cpp abort the process
    except ModelFileError as error:
        raise ModelLoadError(str(error)) from None


def _load_reason(errors: list[str]) -> str | None:
    """What llama.cpp's error lines during a load say went wrong, if they say."""
    for line in errors:
        _, found, why = line.partition("error loading model: ")
        if found and why.strip():
            return why.strip()
    return None


def _memory_kind(L, model) -> MemoryKind:
    if L.llama_model_is_recurrent(model):
        return MemoryKind.RECURRENT
    if L.llama_model_is_hybrid(model):
        return MemoryKind.HYBRID
    if L.llama_model_n_swa(model) > 0:
        return MemoryKind.SWA
    return MemoryKind.PLAIN


ROPE_TYPES_WITH_CELL_POSITIONS = frozenset({8, 40})
"""``LLAMA_ROPE_TYPE_MROPE`` and ``_IMROPE``: llama.cpp keeps a 2D position in every KV cell
(``llama_hparams::n_pos_per_embd() > 1``)."""


def _tensor_split(L, proportions: Sequence[float]):
    """llama.cpp's ``tensor_split``: one proportion per device (RPC servers first, then GPUs)."""
    size = int(L.llama_max_devices())
    if len(proportions) > size:
        raise ModelLoadError(f"the tensor split lists {len(proportions)} devices; this llama.cpp takes at most {size}")
    return (ctypes.c_float * size)(*proportions)


class LlamaModel:
    """Weights and vocabulary of one GGUF file, loaded once and shared by contexts.

    ``placement`` says which device each layer went to (None if llama.cpp did not say).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        n_gpu_layers: int = 0,
        tensor_split: Sequence[float] = (),
        on_progress: LoadProgressFn | None = None,
    ):
        L = lib()
        self._L = L
        self.path = Path(path).expanduser()
        _check_file(self.path)
        params = L.llama_model_default_params()
        params.n_gpu_layers = n_gpu_layers
        split = _tensor_split(L, tensor_split) if tensor_split else None
        if split is not None:
            params.tensor_split = split  # llama.cpp copies it while loading
        self._progress_cb = None
        if on_progress is not None:
            @L.llama_progress_callback
            def _progress(fraction: float, _user: ctypes.c_void_p) -> bool:
                return on_progress(float(fraction)) is not False

            self._progress_cb = _progress
            params.progress_callback = _progress
        placement_log = PlacementLog()
        with held_errors() as errors, log_lines(placement_log):
            self._model = L.llama_model_load_from_file(str(self.path).encode(), params)
        self.placement: Placement | None = placement_log.placement() if self._model else None
        if not self._model:
            raise ModelLoadError(
                f"llama.cpp could not load {self.path.name}: " + (_load_reason(errors) or
                "the file is truncated, damaged, or of an architecture this llama.cpp does not support")
            )
        self.vocab = L.llama_model_get_vocab(self._model)
        self.info = self._read_info()
        self.state_layout = self._state_layout()
        """How this model's sequence states lay out their cells (checked against llama.cpp
        once a context exists: ``sessions.llama.layout_check``)."""

    @property
    def handle(self):
        return self._model

    def _meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(256)
        n = self._L.llama_model_meta_val_str(self._model, key.encode(), buf, len(buf))
        if n < 0:
            return None
        if n >= len(buf):
            buf = ctypes.create_string_buffer(n + 1)
            self._L.llama_model_meta_val_str(self._model, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", "replace")

    def _read_info(self) -> ModelInfo:
        L = self._L
        template = L.llama_model_chat_template(self._model, None)
        bos, eos = L.llama_vocab_bos(self.vocab), L.llama_vocab_eos(self.vocab)
        return ModelInfo(
            path=self.path,
            fingerprint=model_fingerprint(self.path),
            name=self._meta("general.name") or self.path.stem,
            architecture=self._meta("general.architecture") or "unknown",
            n_params=int(L.llama_model_n_params(self._model)),
            n_vocab=int(L.llama_vocab_n_tokens(self.vocab)),
            n_ctx_train=int(L.llama_model_n_ctx_train(self._model)),
            n_swa=int(L.llama_model_n_swa(self._model)),
            kind=_memory_kind(L, self._model),
            chat_template=template.decode("utf-8", "replace") if template else None,
            bos_text=self.token_text(bos) if bos >= 0 else "",
            eos_text=self.token_text(eos) if eos >= 0 else "",
            add_bos=bool(L.llama_vocab_get_add_bos(self.vocab)),
            size_bytes=self.path.stat().st_size,
        )

    def _state_layout(self) -> StateLayout:
        """The layout of this model's attention cells, from its hyperparameters as llama.cpp
        reads them (``llama_kv_cache::has_cell_ext`` and ``llama_hparams::is_mla`` in the
        vendored ``src/``): a cell carries ``llama_kv_cell_ext`` when the rotary positions
        are M-RoPE or IMROPE, or when the model hashes n-grams of token ids (``ple``); an
        MLA cache stores no values."""
        arch = self.info.architecture
        rope = int(self._L.llama_model_rope_type(self._model))
        ple = self._meta_int(f"{arch}.ple.ngram_size") >= 2 and self._meta_int(f"{arch}.ple.heads_per_ngram") > 0
        mla = self._meta_int(f"{arch}.attention.key_length_mla") > 0 and self._meta_int(
            f"{arch}.attention.value_length_mla") > 0
        ext = CELL_EXT_BYTES if rope in ROPE_TYPES_WITH_CELL_POSITIONS or ple else 0
        return StateLayout(cell_ext=ext, values=not mla)

    def _meta_int(self, key: str) -> int:
        value = self._meta(key)
        try:
            return int(value) if value is not None else 0
        except ValueError:
            return 0

    def token_text(self, token: int) -> str:
        raw = self._L.llama_vocab_get_text(self.vocab, token)
        return raw.decode("utf-8", "replace") if raw else ""

    def tokenize(self, text: str, *, add_bos: bool = False, parse_special: bool = True) -> list[int]:
        """Token ids of ``text``; control tokens written in the text become single ids."""
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buf = (self._L.llama_token * capacity)()
        n = self._L.llama_tokenize(self.vocab, data, len(data), buf, capacity, add_bos, parse_special)
        if n < 0:
            capacity = -n
            buf = (self._L.llama_token * capacity)()
            n = self._L.llama_tokenize(self.vocab, data, len(data), buf, capacity, add_bos, parse_special)
        return list(buf[:n])

    def piece(self, token: int, *, special: bool = False) -> bytes:
        """The bytes a token stands for (may be part of a UTF-8 character)."""
        buf = ctypes.create_string_buffer(64)
        n = self._L.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self._L.llama_token_to_piece(self.vocab, token, buf, len(buf), 0, special)
        return buf.raw[:n]

    def special_tokens(self, candidates: Iterable[str]) -> frozenset[str]:
        """Which ``candidates`` are single control tokens here (chat markers, for instance)."""
        return special_token_texts(self._L, self.vocab, candidates)

    def is_eog(self, token: int) -> bool:
        return bool(self._L.llama_vocab_is_eog(self.vocab, token))

    def close(self) -> None:
        if self._model:
            self._L.llama_model_free(self._model)
            self._model = None

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass
