"""The engine in a child process reads token ids as the local engine does (``detokenize``)."""

from __future__ import annotations

import pytest

from sessions.engine.process import EngineProcess
from sessions.llama.detokenizer import Detokenizer
from sessions.llama.model import LlamaModel

from .conftest import split_settings, tiny_model

pytestmark = pytest.mark.rpc


def test_the_child_engine_detokenizes_as_the_vocabulary_reads(shared_pair):
    path = tiny_model("llama")
    engine = EngineProcess(path, split_settings("llama", shared_pair.endpoints), checkpoint_dir=None)
    model = LlamaModel(path, on_progress=lambda _fraction: None)
    try:
        tokens = engine.tokenize("Once upon a time, \U00013003 and \U00010330.", False)
        local = Detokenizer(model.piece)
        for token in tokens:
            local.push(token)
        local.finish()
        assert engine.detokenize(tokens) == local.text
    finally:
        model.close()
        engine.close()
