"""The model list names each model's memory in words a user knows, from its header alone."""

from __future__ import annotations

import pytest

from sessions.discovery import read_model_card
from sessions.discovery.memory_words import memory_words
from sessions.memory_kind import MemoryKind
from sessions.synth import ARCHS, SHAPES, expected_kind, make_model, model_spec
from sessions.synth.metadata import metadata

WORDS = {
    "llama": "plain KV cache",
    "gemma3": "sliding window 64 (1:5)",
    "lfm2": "hybrid: short convolution + attention",
    "mamba": "recurrent: Mamba",
    "qwen35": "hybrid: DeltaNet + attention",
    "qwen3next": "hybrid: DeltaNet + attention",
    "gemma4": "sliding window 64 (1:4), 5 layers reuse KV",
    "gpt-oss": "sliding window 128 (1:1)",
    "granitehybrid": "hybrid: Mamba-2 + attention",
    "mamba2": "recurrent: Mamba-2",
}


def test_every_made_architecture_has_words():
    assert set(WORDS) == set(ARCHS)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_made_models_card_says_its_memory(arch):
    card = read_model_card(make_model(arch))
    assert card.memory_kind is expected_kind(arch)
    assert card.memory_label == WORDS[arch]


@pytest.mark.parametrize(("shape", "words"), [
    ("gemma3-27b", "sliding window 1024 (1:5)"),
    ("gemma4-31b", "sliding window 1024 (1:5)"),
    ("gemma4-e2b", "sliding window 512 (1:4), 20 layers reuse KV"),
    ("gpt-oss-20b", "sliding window 128 (1:1)"),
    ("qwen3.5-9b", "hybrid: DeltaNet + attention"),
    ("granite-4.0-h-small", "hybrid: Mamba-2 + attention"),
])
def test_real_shapes_in_words(shape, words):
    """The words come from the header's keys, here the ones a shape's file would carry."""
    arch = SHAPES[shape].arch
    assert memory_words(expected_kind(arch), arch, dict(metadata(model_spec(arch, shape)))) == words


def test_what_the_header_does_not_say_is_left_out():
    assert memory_words(MemoryKind.SWA, "phi3", {"phi3.attention.sliding_window": 2047}) == "sliding window 2047"
    assert memory_words(MemoryKind.HYBRID, "newhybrid", {}) == "hybrid: recurrent layers + attention"
    assert memory_words(MemoryKind.RECURRENT, "newssm", {}) == "recurrent: state"
    assert memory_words(None, None, {}) is None
