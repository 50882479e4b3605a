"""Embedding models are not offered as chat models, and a load of one says what it is.

An embedding model (BERT and its kin, or a decoder converted with a pooling layer such as
Qwen3-Embedding) turns text into vectors; it has no next-token head. It was listed like
any chat model, and choosing it "replied" with noise and then failed with an unexplained
internal error. Like vision projectors and adapters it is now listed only with ``--all``,
and a load of one is refused in one sentence.
"""

from __future__ import annotations

import pytest

from sessions.config import Config
from sessions.discovery import ModelFileError, check_before_load, discover_models
from sessions.llama.model import LlamaModel, ModelLoadError
from tests.gguf_support import make_gguf


@pytest.fixture
def embedders(tmp_path):
    folder = tmp_path / "models"
    return folder, {
        "bert": make_gguf(folder / "bge-small.gguf", arch="bert", name="bge small", extra={"bert.pooling_type": 2}),
        "nomic": make_gguf(folder / "nomic-embed.gguf", arch="nomic-bert", name="nomic embed"),
        "pooled": make_gguf(folder / "qwen3-embedding.gguf", arch="qwen3", name="qwen3 embedding",
                            extra={"qwen3.pooling_type": 3}),
        "chat": make_gguf(folder / "chat.gguf", arch="qwen3", name="qwen3 chat", extra={"qwen3.pooling_type": 0}),
    }


def test_embedding_models_are_listed_only_with_all(home, embedders):
    folder, files = embedders
    assert [card.path for card in discover_models(Config(model_dirs=[str(folder)]))] == [files["chat"]]
    everything = discover_models(Config(model_dirs=[str(folder)]), include_auxiliary=True)
    assert {card.path for card in everything} == set(files.values())


@pytest.mark.parametrize("kind", ["bert", "nomic", "pooled"])
def test_loading_one_is_refused_in_one_sentence(embedders, kind):
    path = embedders[1][kind]
    with pytest.raises(ModelFileError, match="an embedding model .*not a chat model"):
        check_before_load(path)
    with pytest.raises(ModelLoadError, match="an embedding model"):
        LlamaModel(path)
