"""The made models' memory is what the engine's checkpoints must get right, so it must matter.

Random weights could make a window or a recurrent state irrelevant to what comes next, and an
exactness test on such a model would prove nothing. So for every architecture with a window
or a recurrent state, two branches from a common prefix are decoded, the window or state of
one is put under the other's full-attention KV (llama.cpp's partial sequence state), and the
next logits and the greedy reply must change; putting back the branch's own gives them bit
for bit. And the bytes ``memory_bytes`` computes from the spec are the bytes llama.cpp keeps.

All of it at the llama.cpp level (raw state blobs), below the engine and its checkpoint parser.
"""

from __future__ import annotations

import llama_cpp as L
import numpy as np
import pytest

from sessions.synth import ARCHS, MemoryKind, expected_kind, make_model, memory_bytes, model_spec
from sessions.synth.corpus import CORPUS

from .raw_llama import (  # noqa: F401
    clear,
    decode,
    load_fixture,
    load_seq,
    loaded_models_fixture,
    n_vocab,
    new_context,
    save_seq,
    tokenize,
)

pytestmark = pytest.mark.engine

PARTIAL = L.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
REPLY = 8
WITH_WINDOW_OR_STATE = tuple(arch for arch in ARCHS if expected_kind(arch) is not MemoryKind.PLAIN)


def greedy_reply(ctx, logits: np.ndarray, size: int) -> tuple[list[int], list[np.ndarray]]:
    """``REPLY`` greedy tokens from ``logits`` on, and the logits after each."""
    tokens, seen = [], []
    for _ in range(REPLY):
        tokens.append(int(np.argmax(logits)))
        logits = decode(ctx, tokens[-1:], size)
        seen.append(logits)
    return tokens, seen


@pytest.mark.parametrize("arch", WITH_WINDOW_OR_STATE)
def test_the_window_or_state_of_another_branch_changes_the_reply(arch, load):
    model, _ = load(make_model(arch))
    size = n_vocab(model)
    text = tokenize(L.llama_model_get_vocab(model), CORPUS)
    window = model_spec(arch).swa_window
    # Each branch is longer than any window, so the two windows share no token.
    prefix, branch_a, branch_b = text[:96], text[100:260], text[300:460]
    assert len(branch_b) > window and len(branch_a) == len(branch_b)
    ctx = new_context(model, n_ctx=512)
    try:
        decode(ctx, prefix + branch_a, size)
        window_a = save_seq(ctx, PARTIAL)
        clear(ctx)
        last_b = decode(ctx, prefix + branch_b, size)
        whole_b, window_b = save_seq(ctx), save_seq(ctx, PARTIAL)
        reference = greedy_reply(ctx, last_b, size)

        replies = {}
        for name, window_state in (("own", window_b), ("other", window_a)):
            clear(ctx)
            load_seq(ctx, whole_b)
            load_seq(ctx, window_state, PARTIAL)
            replies[name] = greedy_reply(ctx, last_b, size)
    finally:
        L.llama_free(ctx)

    own, other = replies["own"], replies["other"]
    assert own[0] == reference[0] and all(map(np.array_equal, own[1], reference[1])), \
        "restoring the branch's own window or state did not give its logits bit for bit"
    first = np.abs(other[1][0] - reference[1][0])
    assert first.max() > 1.0, f"another branch's window or state barely moves the logits ({first.max():.3f})"
    assert other[0] != reference[0], "another branch's window or state leaves the greedy reply as it was"


@pytest.mark.parametrize("arch", ARCHS)
def test_memory_bytes_are_the_bytes_llama_cpp_keeps(arch, load):
    """A token adds its KV rows plus 12 bytes of cell metadata per KV cache (position, count,
    sequence id; 12 more with IMROPE's extra positions); a recurrent state is its tensors plus
    a 28-byte header and 24 bytes per recurrent layer."""
    spec = model_spec(arch)
    expected = memory_bytes(spec)
    model, _ = load(make_model(arch))
    rope_extension = L.llama_model_rope_type(model) == L.LLAMA_ROPE_TYPE_IMROPE
    assert rope_extension is (arch == "qwen35")
    caches = (2 if expected.window else 1) if expected.kv_per_token else 0
    recurrent_layers = sum(not spec.is_attention_layer(i) for i in range(spec.n_layer))
    size = n_vocab(model)
    text = tokenize(L.llama_model_get_vocab(model), CORPUS)
    ctx = new_context(model)
    try:
        decode(ctx, text[:10], size)
        whole, partial = len(save_seq(ctx)), len(save_seq(ctx, PARTIAL))
        decode(ctx, text[10:11], size)
        grown, partial_grown = len(save_seq(ctx)) - whole, len(save_seq(ctx, PARTIAL)) - partial
    finally:
        L.llama_free(ctx)

    assert grown == expected.kv_per_token + caches * (24 if rope_extension else 12)
    if expected.window:
        assert partial_grown == expected.window_kv_per_token + 12
    if expected.state:
        assert partial_grown == 0
        assert partial == expected.state + 28 + 24 * recurrent_layers


def test_granite_attention_has_no_positions(load):
    """Shifting every position leaves a NoPE model's logits bit for bit as they were (Mamba-2
    layers have no positions either); a rotary model's move."""
    results = {}
    for arch in ("granitehybrid", "llama"):
        model, _ = load(make_model(arch))
        size = n_vocab(model)
        tokens = tokenize(L.llama_model_get_vocab(model), CORPUS)[:40]
        logits = []
        for start in (0, 1000):
            ctx = new_context(model, n_ctx=2048)
            batch = L.llama_batch_init(len(tokens), 0, 1)
            try:
                for i, token in enumerate(tokens):
                    batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, start + i, 1
                    batch.seq_id[i][0], batch.logits[i] = 0, i == len(tokens) - 1
                batch.n_tokens = len(tokens)
                assert L.llama_decode(ctx, batch) == 0
                logits.append(np.ctypeslib.as_array(L.llama_get_logits_ith(ctx, -1), shape=(size,)).copy())
            finally:
                L.llama_batch_free(batch)
                L.llama_free(ctx)
        results[arch] = np.array_equal(*logits)
    assert results == {"granitehybrid": True, "llama": False}
