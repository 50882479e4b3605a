"""Raw llama.cpp calls for the made-model tests: tokens, contexts, decoding, state blobs.

A test module uses the fixtures by importing ``load_fixture`` and ``loaded_models_fixture``
(they are named ``load`` and ``loaded_models``).

These tests check the models against llama.cpp itself, below the project's own bindings and
checkpoint parser, so that what they prove does not depend on the code they test.
"""

from __future__ import annotations

import ctypes
import time
from pathlib import Path

import llama_cpp as L
import numpy as np
import pytest

L.llama_backend_init()


@L.llama_log_callback
def _quiet_log(level, text, user_data):  # noqa: ARG001 - llama.cpp's callback signature
    """llama.cpp logs every loaded key and tensor; keep test output readable."""


L.llama_log_set(_quiet_log, ctypes.c_void_p())


def tokenize(vocab, text: str, *, special: bool = False) -> list[int]:
    data = text.encode("utf-8")
    buffer = (L.llama_token * (len(data) + 8))()
    n = L.llama_tokenize(vocab, data, len(data), buffer, len(buffer), False, special)
    assert n >= 0, f"tokenizing {text!r} failed"
    return list(buffer[:n])


def piece(vocab, token: int) -> bytes:
    buffer = ctypes.create_string_buffer(64)
    n = L.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, False)
    assert n >= 0
    return buffer.raw[:n]


def n_vocab(model) -> int:
    return L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))


def new_context(model, n_ctx: int = 256):
    params = L.llama_context_default_params()
    params.n_ctx = n_ctx
    params.n_batch = n_ctx
    params.n_ubatch = n_ctx
    params.n_seq_max = 1
    params.n_threads = 1
    params.n_threads_batch = 1
    ctx = L.llama_init_from_model(model, params)
    assert ctx, "llama.cpp could not create a context"
    return ctx


def decode(ctx, tokens: list[int], vocab_size: int) -> np.ndarray:
    """Decode ``tokens`` as one batch after what the context holds; a copy of the last logits."""
    array = (L.llama_token * len(tokens))(*tokens)
    assert L.llama_decode(ctx, L.llama_batch_get_one(array, len(tokens))) == 0
    logits = L.llama_get_logits_ith(ctx, -1)
    return np.ctypeslib.as_array(logits, shape=(vocab_size,)).copy()


def greedy(model, prompt: list[int], n_new: int) -> list[int]:
    size = n_vocab(model)
    ctx = new_context(model, n_ctx=len(prompt) + n_new + 8)
    try:
        logits = decode(ctx, prompt, size)
        out: list[int] = []
        for _ in range(n_new):
            out.append(int(np.argmax(logits)))
            logits = decode(ctx, out[-1:], size)
        return out
    finally:
        L.llama_free(ctx)


def clear(ctx) -> None:
    L.llama_memory_clear(L.llama_get_memory(ctx), True)


def save_seq(ctx, flags: int = 0) -> bytes:
    """Sequence 0's state as llama.cpp writes it (``flags``: LLAMA_STATE_SEQ_FLAGS_*)."""
    size = L.llama_state_seq_get_size_ext(ctx, 0, flags)
    buffer = (ctypes.c_uint8 * size)()
    written = L.llama_state_seq_get_data_ext(ctx, buffer, size, 0, flags)
    assert written == size, f"llama.cpp wrote {written} of {size} state bytes"
    return bytes(buffer)


def load_seq(ctx, blob: bytes, flags: int = 0) -> None:
    buffer = (ctypes.c_uint8 * len(blob)).from_buffer_copy(blob)
    assert L.llama_state_seq_set_data_ext(ctx, buffer, len(blob), 0, flags) == len(blob), "state not read"


@pytest.fixture(scope="module", name="loaded_models")
def loaded_models_fixture():
    """Models loaded once per module, keyed by path (they are freed at the end)."""
    models: dict[Path, tuple[object, float]] = {}
    yield models
    for model, _ in models.values():
        L.llama_model_free(model)


@pytest.fixture(name="load")
def load_fixture(loaded_models):
    """Load a made model (once per module) and return ``(model, load_seconds)``."""

    def _load(path: Path):
        if path not in loaded_models:
            params = L.llama_model_default_params()
            start = time.perf_counter()
            model = L.llama_model_load_from_file(str(path).encode(), params)
            seconds = time.perf_counter() - start
            assert model, f"llama.cpp could not load {path}"
            loaded_models[path] = (model, seconds)
        return loaded_models[path]

    return _load
