"""A branch warmed ahead restores from RAM, exactly, and the live context never notices.

After a reopen every checkpoint is on disk. ``warm_ahead`` on another branch reads its
route into the RAM tier; the switch there then restores from RAM only and lands on the
bits of a recompute. A stop ends the reads, and the live tokens and logits stay as they
were whatever it does.
"""

from __future__ import annotations

import numpy as np
import pytest

from sessions.checkpoints import CheckpointStore

from .conftest import ARCHS
from .test_exactness import branch, check, engine_for, flat


def tiers(plan) -> list[str]:
    parts = [*plan.restore, *(s for s in (plan.rewind, plan.snapshot) if s is not None)]
    return [part.tier for part in parts]


def reopened(model, tmp_path, original, other):
    """A store that held ``original`` and ``other`` reopened (all on disk), and an engine
    of its own on ``other``."""
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as first:
        engine = engine_for(model, first)
        engine.prepare(*flat(original))
        engine.prepare(*flat(other))
        first.flush()
        engine.ctx.close()
    store = CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30)
    engine = engine_for(model, store)
    engine.prepare(*flat(other))
    return store, engine


@pytest.mark.parametrize("arch", ARCHS)
def test_a_warmed_branch_restores_from_ram_exactly(loaded_models, tmp_path, arch):
    model = loaded_models[arch]
    original, other = branch(model, 0, 1, 2, 3), branch(model, 0, 5)
    store, engine = reopened(model, tmp_path, original, other)
    with store:
        assert "disk" in tiers(engine.plan(*flat(original)))
        live, live_logits = list(engine.live), np.copy(engine.live_logits)

        warmed = engine.warm_ahead(*flat(original), lambda: False)

        assert warmed.segments > 0 and warmed.nbytes > 0 and not warmed.stopped and warmed.left == 0
        assert engine.live == live and np.array_equal(engine.live_logits, live_logits)
        assert set(tiers(engine.plan(*flat(original)))) == {"ram"}
        assert set(tiers(engine.plan(*flat(original), need_logits=False))) == {"ram"}
        again = engine.warm_ahead(*flat(original), lambda: False)  # all in RAM now: nothing is read again
        assert (again.nbytes, again.segments, again.left, again.in_ram) == (0, 0, 0, warmed.segments + warmed.in_ram)
        hits_disk = store.stats().hits_disk
        result = check(engine, model, original)
        assert set(tiers(result.plan)) == {"ram"} and result.bytes_restored > 0
        assert store.stats().hits_disk == hits_disk  # nothing read from disk on the switch


@pytest.mark.parametrize("arch", ARCHS)
def test_the_live_context_is_untouched_by_a_warm(loaded_models, tmp_path, arch):
    model = loaded_models[arch]
    original, other = branch(model, 0, 1, 2, 3), branch(model, 0, 5)
    store, engine = reopened(model, tmp_path, original, other)
    with store:
        live, live_logits = list(engine.live), np.copy(engine.live_logits)
        engine.warm_ahead(*flat(original), lambda: False)
        assert engine.live == live and np.array_equal(engine.live_logits, live_logits)
        result = check(engine, model, other)  # the live branch, read again: still exact
        assert result.tokens_evaluated == 0 and result.plan.keep == len(live)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_stopped_warm_reads_nothing_more(loaded_models, tmp_path, arch):
    model = loaded_models[arch]
    original, other = branch(model, 0, 1, 2, 3), branch(model, 0, 5)
    store, engine = reopened(model, tmp_path, original, other)
    with store:
        before = store.stats().ram_bytes
        at_once = engine.warm_ahead(*flat(original), lambda: True)
        assert at_once.stopped and at_once.segments == 0 and at_once.left > 0
        assert store.stats().ram_bytes == before
        asked = iter([False, True])
        warmed = engine.warm_ahead(*flat(original), lambda: next(asked))  # stopped after one read
        assert warmed.segments == 1 and warmed.left == at_once.left - 1 and warmed.stopped == (warmed.left > 0)
        assert store.stats().ram_bytes == before + warmed.nbytes
        if warmed.left:
            assert "disk" in tiers(engine.plan(*flat(original)))
