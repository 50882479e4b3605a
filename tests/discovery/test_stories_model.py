"""A real trained model (stories260K) through the same low-level calls the engine uses.

The made models only prove that numbers are finite and reproducible; this tiny trained
model proves the calls themselves are right (BOS handling, batch decoding, logits of the
last token, detokenizing), because wrong plumbing would not produce English.
"""

from __future__ import annotations

import ctypes
import re

import llama_cpp as L
import numpy as np
import pytest

pytestmark = pytest.mark.engine

L.llama_backend_init()


@L.llama_log_callback
def _quiet_log(level, text, user_data):  # noqa: ARG001 - llama.cpp's callback signature
    """llama.cpp logs every loaded key and tensor; keep test output readable."""


L.llama_log_set(_quiet_log, ctypes.c_void_p())

COMMON_WORDS = {
    "a", "and", "the", "was", "to", "he", "she", "it", "they", "her", "his", "said", "saw", "in",
    "on", "with", "of", "little", "big", "day", "time", "there", "lived", "girl", "boy", "named",
    "happy", "very", "play", "wanted", "loved", "one", "went", "had", "mom", "friend",
}


@pytest.fixture(scope="module")
def stories(shared_dir):
    path = shared_dir / "models" / "stories260K.gguf"
    model = L.llama_model_load_from_file(str(path).encode(), L.llama_model_default_params())
    assert model, f"llama.cpp could not load {path}"
    yield model
    L.llama_model_free(model)


def continue_greedily(model, prompt: str, n_new: int) -> tuple[list[int], str]:
    vocab = L.llama_model_get_vocab(model)
    n_vocab = L.llama_vocab_n_tokens(vocab)
    data = prompt.encode()
    buffer = (L.llama_token * (len(data) + 8))()
    n = L.llama_tokenize(vocab, data, len(data), buffer, len(buffer), True, False)
    assert n > 0
    tokens = list(buffer[:n])
    assert tokens[0] == L.llama_vocab_bos(vocab), "the prompt does not start with BOS"

    params = L.llama_context_default_params()
    params.n_ctx = 128
    params.n_batch = 128
    params.n_threads = 1
    params.n_threads_batch = 1
    ctx = L.llama_init_from_model(model, params)
    assert ctx
    out: list[int] = []
    text = b""
    try:
        batch = tokens
        for _ in range(n_new):
            array = (L.llama_token * len(batch))(*batch)
            assert L.llama_decode(ctx, L.llama_batch_get_one(array, len(batch))) == 0
            logits = np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))
            token = int(np.argmax(logits))
            if L.llama_vocab_is_eog(vocab, token):
                break
            out.append(token)
            piece = ctypes.create_string_buffer(64)
            size = L.llama_token_to_piece(vocab, token, piece, len(piece), 0, False)
            text += piece.raw[:size]
            batch = [token]
    finally:
        L.llama_free(ctx)
    return out, text.decode("utf-8", errors="replace")


def test_greedy_continuation_is_english(stories):
    tokens, text = continue_greedily(stories, "Once upon a time", 30)
    words = re.findall(r"[A-Za-z]+", text)
    assert len(tokens) >= 10, f"generation stopped early: {text!r}"
    assert text.isascii(), text
    assert sum(word.lower() in COMMON_WORDS for word in words) >= 5, text


def test_greedy_continuation_is_deterministic(stories):
    assert continue_greedily(stories, "Once upon a time", 30) == continue_greedily(stories, "Once upon a time", 30)
