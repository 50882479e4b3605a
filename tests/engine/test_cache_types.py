"""Quantized K and V caches (``-ctk``/``-ctv``): restores stay exact, and a type the model
cannot take is refused in words."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sessions.checkpoints import CheckpointStore
from sessions.llama.cache_types import CACHE_TYPES, bytes_per_value, type_id
from sessions.llama.context import ContextParams, DecodeError, LlamaContext
from sessions.llama.model import LlamaModel

from .conftest import ARCHS
from .test_exactness import LONG, PARAMS, branch, check, engine_for, flat, toks

TYPES = [("q8_0", "q8_0"), ("q4_0", "q8_0")]


@pytest.mark.parametrize(("k", "v"), TYPES)
@pytest.mark.parametrize("arch", ARCHS)
def test_a_quantized_cache_restores_exactly_from_ram_and_from_disk(loaded_models, tmp_path, arch, k, v):
    """Past the window, an edit, back to the first branch from RAM, then a reopen with
    everything from disk: each equals a recompute with the same cache types."""
    model = loaded_models[arch]
    params = replace(PARAMS, type_k=type_id(k), type_v=type_id(v))
    original = branch(model, 0, 1, 2, 3, 4, repeat=LONG)
    edited = branch(model, 0, 1, 2, 6, repeat=LONG)
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as first:
        engine = engine_for(model, first, params=params)
        engine.prepare(*flat(original))
        engine.prepare(*flat(edited))
        result = check(engine, model, original + branch(model, 5))
        assert result.tokens_evaluated == len(toks(model, 5))
        engine.ctx.close()
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as second:
        engine = engine_for(model, second, params=params)
        result = check(engine, model, edited + branch(model, 4))
        assert result.tokens_evaluated == len(toks(model, 4))
        assert result.tokens_restored > 0 and all(info.tier == "disk" for info in result.plan.restore)
        engine.ctx.close()


def test_checkpoints_of_one_cache_type_are_not_restored_into_another(loaded_models, tmp_path):
    model = loaded_models["llama"]
    msgs = branch(model, 0, 1, 2)
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        engine_for(model, store, params=replace(PARAMS, type_k=type_id("q8_0"))).prepare(*flat(msgs))
        result = check(engine_for(model, store), model, msgs)
        assert result.tokens_restored == 0 and result.tokens_evaluated == len(flat(msgs)[0])


def test_a_type_whose_blocks_do_not_divide_the_heads_is_refused_in_words(shared_dir):
    """stories260K has heads of 8 values; q8_0 keeps blocks of 32. llama.cpp refuses the
    context (it would not abort the process), and the error says why."""
    model = LlamaModel(shared_dir / "models" / "stories260K.gguf")
    try:
        with pytest.raises(DecodeError, match="K cache type q8_0 with block size 32 does not divide n_embd_head_k=8"):
            LlamaContext(model, ContextParams(n_ctx=256, n_batch=32, type_k=type_id("q8_0")))
        LlamaContext(model, ContextParams(n_ctx=256, n_batch=32, type_k=type_id("f32"))).close()  # still usable
    finally:
        model.close()


def test_the_types_are_llama_cpps():
    assert [type_id(name) for name in CACHE_TYPES] == [0, 1, 30, 8, 2, 3, 20, 6, 7]
    assert [bytes_per_value(type_id(name)) for name in ("f16", "q8_0", "q4_0")] == [2.0, 34 / 32, 18 / 32]
    with pytest.raises(ValueError, match="unknown cache type 'q3_k'"):
        type_id("q3_k")
