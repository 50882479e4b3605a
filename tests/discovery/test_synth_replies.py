"""Made chat models write replies.

Tests of continuing, cutting or versioning a reply prove nothing on a model whose replies
are empty, so every made architecture is held here, against llama.cpp itself, to two
things: the logits of the tokens it may write have the spread the weights are drawn for,
and its greedy reply to a short question, asked through its own chat template, has text.
The weights revision that leans chat markers for one architecture changes the name and the
bytes of its files only, and of those only the markers' output rows.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import jinja2.sandbox
import llama_cpp as L
import numpy as np
import pytest

from sessions.synth import ARCHS, make_model, model_hash, model_spec, weights
from sessions.synth.vocab import build_vocab

from .raw_llama import decode, load_fixture, loaded_models_fixture, new_context, piece, tokenize  # noqa: F401

pytestmark = pytest.mark.engine

QUESTIONS = (
    "What is the capital of France?",
    "How do I boil an egg?",
    "Tell me a joke.",
    "Why is the sky blue?",
    "What time is it?",
    "Can you help me write a poem?",
    "Who wrote Hamlet?",
    "What is two plus two?",
)
REPLY_TOKENS = 10
SPREAD_FACTOR = 1.5
"""How far from ``weights.LOGIT_STD`` the spread of writable tokens' logits may be."""


def chat_prompt(model, question: str) -> list[int]:
    """The tokens of ``question`` as a user turn plus the generation prompt, by the model's template."""
    template = L.llama_model_chat_template(model, None).decode()
    text = jinja2.sandbox.ImmutableSandboxedEnvironment().from_string(template).render(
        messages=[{"role": "user", "content": question}], add_generation_prompt=True)
    return tokenize(L.llama_model_get_vocab(model), text, special=True)


def greedy_reply(model, prompt: list[int]) -> str:
    """The text of the greedy reply, ended by an end-of-generation token or its length."""
    vocab = L.llama_model_get_vocab(model)
    size = L.llama_vocab_n_tokens(vocab)
    ctx = new_context(model, n_ctx=len(prompt) + REPLY_TOKENS + 8)
    try:
        logits, written = decode(ctx, prompt, size), b""
        for _ in range(REPLY_TOKENS):
            token = int(np.argmax(logits))
            if L.llama_vocab_is_eog(vocab, token):
                break
            written += piece(vocab, token)
            logits = decode(ctx, [token], size)
        return written.decode("utf-8", errors="replace")
    finally:
        L.llama_free(ctx)


@pytest.mark.parametrize("arch", ARCHS)
def test_writable_tokens_logits_have_the_spread_they_are_made_for(arch, load):
    model, _ = load(make_model(arch))
    size = L.llama_vocab_n_tokens(L.llama_model_get_vocab(model))
    writable = np.ones(size, dtype=bool)
    writable[build_vocab(size).never_predicted()] = False
    for question in QUESTIONS[:3]:
        ctx = new_context(model)
        try:
            logits = decode(ctx, chat_prompt(model, question), size)
        finally:
            L.llama_free(ctx)
        spread = float(logits[writable].std())
        assert weights.LOGIT_STD / SPREAD_FACTOR < spread < weights.LOGIT_STD * SPREAD_FACTOR, (question, spread)


@pytest.mark.parametrize("arch", ARCHS)
def test_greedy_replies_to_short_questions_have_text(arch, load):
    model, _ = load(make_model(arch))
    replies = {question: greedy_reply(model, chat_prompt(model, question)) for question in QUESTIONS}
    empty = [question for question, reply in replies.items() if not reply.strip()]
    assert len(empty) <= 1, f"empty replies to {empty}: {replies}"


def test_a_weights_revision_renames_only_its_architectures_files(monkeypatch):
    listed = set(weights.WEIGHTS_REVISIONS)
    revised = {arch: model_hash(model_spec(arch), 0) for arch in ARCHS}
    monkeypatch.setattr(weights, "WEIGHTS_REVISIONS", {})
    unrevised = {arch: model_hash(model_spec(arch), 0) for arch in ARCHS}
    assert {arch for arch in ARCHS if revised[arch] != unrevised[arch]} == listed


@pytest.mark.parametrize("arch", sorted(weights.WEIGHTS_REVISIONS))
def test_leaning_markers_changes_only_their_output_rows(arch, tmp_path, monkeypatch):
    monkeypatch.setenv("LLAMACHAT_MODEL_CACHE", str(tmp_path))
    revised = tensors_of(make_model(arch))
    monkeypatch.setattr(weights, "WEIGHTS_REVISIONS", {})
    unrevised = tensors_of(make_model(arch))
    assert revised.keys() == unrevised.keys()
    assert [name for name in revised if not np.array_equal(revised[name], unrevised[name])] == ["output.weight"]
    changed = np.argwhere(revised["output.weight"] != unrevised["output.weight"])
    markers = build_vocab(model_spec(arch).vocab_size).chat_markers()
    assert sorted(map(tuple, changed)) == [(token, 0) for token in markers]
    assert (revised["output.weight"][markers, 0] < 0).all()


def tensors_of(path: Path) -> dict[str, np.ndarray]:
    return {tensor.name: np.array(tensor.data) for tensor in gguf.GGUFReader(path).tensors}
