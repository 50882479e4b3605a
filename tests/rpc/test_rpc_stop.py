"""Stops over RPC: between batches, never midway; an engine that dies mid-write is harmless.

A graph stopped midway is an abort in llama.cpp's RPC client, so with RPC a stop takes
effect between prompt batches and between reply tokens. The engine stays exact after a
stop. And a child that dies while it writes a checkpoint file (a crash point kills it
between the fsync of the temp file and the rename) leaves at most a temp file, which the
next store removes; every file under a final name verifies.
"""

from __future__ import annotations

import numpy as np
import pytest

from sessions.engine.process import EngineProcess
from sessions.errors import DecodeCancelled
from sessions.rpc.errors import EngineLost
from sessions.sampling import SamplingSettings
from tests.trials.crash_checks import CheckpointScanner

from .conftest import split_settings, tiny_model
from .test_rpc_exactness import TEXTS, flat

pytestmark = [pytest.mark.rpc, pytest.mark.engine]


def long_branch(engine) -> list[list[int]]:
    return [engine.tokenize(TEXTS[0], True)] + [engine.tokenize(" ".join([TEXTS[i]] * 6), False) for i in (1, 2, 3)]


@pytest.mark.parametrize("arch", ["gemma3", "mamba"])
def test_a_stop_during_the_prompt_lands_between_batches(shared_pair, tmp_path, arch):
    path, settings = tiny_model(arch), split_settings(arch, shared_pair.endpoints)
    engine = EngineProcess(path, settings, checkpoint_dir=tmp_path / "ck")
    try:
        msgs = long_branch(engine)
        tokens, ends = flat(msgs)
        seen: list[int] = []

        def stop_after_first_batch(done, total, rate) -> None:
            seen.append(done)
            if len(seen) == 1:
                engine.request_abort()

        with pytest.raises(DecodeCancelled):
            engine.prepare(tokens, ends, on_progress=stop_after_first_batch)
        assert seen and seen[-1] < len(tokens)
        engine.clear_abort()
        result = engine.prepare(tokens, ends)
        greedy = SamplingSettings(temperature=0.0)
        stopped = engine.generate(result.logits, greedy, max_tokens=500, should_stop=lambda: True)
        assert stopped.stop_reason == "cancelled" and stopped.tokens == []
    finally:
        engine.close()
    ref = EngineProcess(path, settings, checkpoint_dir=None)
    try:
        expected = ref.prepare(tokens, ends)
        assert expected.tokens_evaluated == len(tokens)
        assert np.array_equal(result.logits, expected.logits)
    finally:
        ref.close()


def test_an_engine_killed_while_it_writes_a_checkpoint(shared_pair, tmp_path, monkeypatch):
    monkeypatch.setenv("LLAMACHAT_CRASH_AT", "checkpoint.before_rename:2")
    path = tiny_model("llama")
    engine = EngineProcess(path, split_settings("llama", shared_pair.endpoints), checkpoint_dir=tmp_path / "ck")
    try:
        with pytest.raises(EngineLost) as lost:
            for _ in range(50):  # the writer thread dies on its second rename, at some call
                engine.prepare(*flat(long_branch(engine)))
                engine.prepare([5], [1])
        assert "the engine process ended" in str(lost.value) and "\n" not in str(lost.value)
    finally:
        engine.close()
    scan = CheckpointScanner(tmp_path / "ck").scan()
    assert scan.temp_before >= 1 and scan.temp_after == 0
    assert scan.verified >= 1 and scan.bad == [] and scan.problems == []
