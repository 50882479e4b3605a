"""Stopping a long prompt midway leaves an engine that is still exact."""

from __future__ import annotations

import numpy as np
import pytest

from sessions.errors import DecodeCancelled

from .conftest import ARCHS
from .test_exactness import branch, engine_for, flat, reference


@pytest.mark.parametrize("arch", ARCHS)
def test_cancel_during_prompt_then_resume(loaded_models, tmp_path, arch):
    from sessions.checkpoints import CheckpointStore

    model = loaded_models[arch]
    msgs = branch(model, 0, 1, 2, 3, 4, repeat={1: 4, 2: 4, 3: 4})
    tokens, ends = flat(msgs)
    with CheckpointStore(tmp_path / "ck", ram_bytes=1 << 28, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store, interval=32)
        seen = []

        def stop_after_some(done, total, rate):
            seen.append(done)
            if done >= total // 2:
                engine.ctx.request_abort()

        with pytest.raises(DecodeCancelled):
            engine.prepare(tokens, ends, on_progress=stop_after_some)
        assert seen and seen[-1] < len(tokens)
        engine.ctx.clear_abort()
        result = engine.prepare(tokens, ends)
        # Work done before the stop was kept (live or in checkpoints), not thrown away.
        assert result.tokens_evaluated < len(tokens) - seen[-1] + 64
        logits, _ = reference(model, msgs, interval=32)
        assert np.array_equal(result.logits, logits)
