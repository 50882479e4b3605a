"""A long reply's checkpoints are named by hashing each of its tokens once, not once per range.

A reply is checkpointed every ``interval`` tokens; naming each range by hashing the whole
live sequence again made a reply's bookkeeping grow with the square of its length. The
names must stay the ones a later ``prepare`` looks for.
"""

from __future__ import annotations

import pytest

from sessions.branching.segments import message_ends
from sessions.checkpoints import CheckpointStore, keys, prefix_hash
from sessions.llama.sampler import Sampler
from sessions.sampling import SamplingSettings

from .test_exactness import branch, check, engine_for, flat

INTERVAL = 16


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_a_long_reply_hashes_each_token_once_and_names_its_ranges_as_prepare_does(loaded_models, tmp_path, arch,
                                                                                  monkeypatch):
    model = loaded_models[arch]
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store, interval=INTERVAL)
        msgs = branch(model, 0, 1)
        result = engine.prepare(*flat(msgs), reply_follows=True)
        hashed: list[int] = []
        pack = keys._pack

        def counted(tokens):
            hashed.append(len(tokens))
            return pack(tokens)

        monkeypatch.setattr(keys, "_pack", counted)
        sampler = Sampler(SamplingSettings(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=7),
                          model.info.n_vocab)
        assert result.logits is not None
        reply = engine.generate(result.logits, sampler, max_tokens=12 * INTERVAL)
        sampler.close()
        monkeypatch.undo()
        live = engine.live
        assert len(reply.tokens) >= 6 * INTERVAL  # long enough for the square to show
        assert sum(hashed) <= len(live)  # the prompt once (for the reply's first range), then each token once
        start = len(flat(msgs)[0])
        for b in range(start + INTERVAL, len(live) + 1, INTERVAL):
            assert store.has(engine.compat, prefix_hash(live[:b]), "cells"), b
        engine.ctx.close()
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        follow = msgs + [reply.tokens] + branch(model, 3)
        stepped = [False, False, True, False]
        result = check(engine_for(model, store, interval=INTERVAL), model, follow, interval=INTERVAL,
                       stepped=stepped)
        assert result.tokens_evaluated < len(flat(follow)[0]) - len(live) + INTERVAL  # the reply came back
        assert message_ends([len(m) for m in follow])[-2] == len(live)
