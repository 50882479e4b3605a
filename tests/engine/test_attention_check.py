"""llama.cpp's verdict on flash attention, heard through a real probe context.

On this machine every layer is on the CPU, which has flash attention for every model,
so the verdict is "supported"; what this proves is that the probe makes its context and
reads llama.cpp's own lines (a changed line would give no verdict and fail here). The
lines of a refusal are in ``tests/test_attention_notice.py``.
"""

from __future__ import annotations

import pytest

from sessions.engine.attention_check import AttentionVerdict, flash_attention_verdict
from sessions.engine.context import ContextParams
from tests.engine.conftest import ARCHS


@pytest.mark.parametrize("arch", ARCHS)
def test_llama_cpp_gives_its_verdict(arch, loaded_models):
    assert flash_attention_verdict(loaded_models[arch], ContextParams()) == AttentionVerdict(True)


def test_a_quantized_v_cache_gets_none(loaded_models):
    """llama.cpp turns flash attention on for a quantized V cache without checking."""
    from sessions.engine.cache_types import type_id

    params = ContextParams(type_k=type_id("q8_0"), type_v=type_id("q8_0"))
    assert flash_attention_verdict(loaded_models["llama"], params) is None
