"""llama.cpp's verdict on flash attention, heard through a real probe context.

On this machine every layer is on the CPU, which has flash attention for every model,
so the verdict is "supported"; what this proves is that the probe makes its context and
reads llama.cpp's own lines (a changed line would give no verdict and fail here). The
lines of a refusal are in ``tests/controller/test_attention_notice.py``.
"""

from __future__ import annotations

import pytest

from sessions.llama.attention_check import AttentionVerdict, flash_attention_verdict
from sessions.llama.context import ContextParams
from tests.engine.conftest import ARCHS


@pytest.mark.parametrize("arch", ARCHS)
def test_llama_cpp_gives_its_verdict(arch, loaded_models):
    assert flash_attention_verdict(loaded_models[arch], ContextParams()) == AttentionVerdict(True)


def test_a_quantized_v_cache_gets_none(loaded_models):
    """llama.cpp turns flash attention on for a quantized V cache without checking."""
    from sessions.llama.cache_types import type_id

    params = ContextParams(type_k=type_id("q8_0"), type_v=type_id("q8_0"))
    assert flash_attention_verdict(loaded_models["llama"], params) is None


@pytest.mark.parametrize("verdict", [AttentionVerdict(True), AttentionVerdict(False, "CUDA0", "CPU"), None])
def test_an_engine_with_a_layer_on_a_gpu_asks_and_keeps_the_answer(verdict, model_paths, monkeypatch):
    """What the engine does with each answer; the question is only asked with a GPU layer
    (here every layer is on the CPU, so the placement is told it has one)."""
    from sessions.engine import chat_engine
    from sessions.llama.placement import Placement

    asked = []

    def answer(model, params):
        asked.append(params)
        return verdict

    monkeypatch.setattr(chat_engine, "flash_attention_verdict", answer)
    params = ContextParams(n_ctx=256, n_batch=32)
    engine = chat_engine.LlamaChatEngine(model_paths["llama"], params)
    try:
        assert asked == [] and engine.placement is not None and engine.placement.attention_elsewhere is None
    finally:
        engine.close()
    monkeypatch.setattr(Placement, "on_local_gpu", property(lambda self: True))
    engine = chat_engine.LlamaChatEngine(model_paths["llama"], params)
    try:
        assert asked == [params]
        placement = engine.placement
        assert placement is not None
        refused = verdict is not None and not verdict.supported
        assert placement.attention_elsewhere == (("CUDA0", "CPU") if refused else None)
        assert (placement.attention_notice() is not None) == refused
    finally:
        engine.close()
