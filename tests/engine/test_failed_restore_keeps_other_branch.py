"""A switch whose restore fails leaves the branch it left on disk, as a switch that works does.

When the restore of a switch fails, the engine rebuilds the new branch from token 0; the
prompt end and tip of the branch it came from stay on disk, and a later switch back (or
a restart) restores them without decoding.
"""

from __future__ import annotations

import numpy as np

from sessions.branching.snapshot_policy import SnapshotPolicy
from sessions.checkpoints import CheckpointStore

from .test_exactness import engine_for, flat, reference
from .test_snapshot_policy import _turn

RAM, DISK = 256 << 20, 1 << 30


def test_a_failed_switch_keeps_the_prompt_end_and_tip_of_the_branch_it_left(loaded_models, tmp_path, monkeypatch):
    """On the sliding-window model, whose windows a rebuilt branch could have replaced."""
    model = loaded_models["gemma3"]
    with CheckpointStore(tmp_path / "ck", ram_bytes=RAM, disk_bytes=DISK) as store:
        engine = engine_for(model, store, policy=SnapshotPolicy())
        main, main_steps = _turn(engine, model, [model.tokenize("Hi.", add_bos=True)], [False], 1)
        store.flush()
        left = set((tmp_path / "ck").glob("*/*.snap"))
        assert len(left) >= 2  # the prompt end and the tip, at least

        cut = engine.ctx.seq_rm
        refused: list[int] = []

        def refuse_once(seq, p0=-1, p1=-1):
            if not refused and seq == 0 and p0 > 0:
                refused.append(p0)
                return False  # llama.cpp refuses the cut: the restore fails, the branch is rebuilt
            return cut(seq, p0, p1)

        monkeypatch.setattr(engine.ctx, "seq_rm", refuse_once)
        _turn(engine, model, main[:1], [False], 2)  # an edit of the first question
        monkeypatch.undo()
        assert refused
        store.flush()
        assert left <= set((tmp_path / "ck").glob("*/*.snap"))
        engine.ctx.close()
    with CheckpointStore(tmp_path / "ck", ram_bytes=RAM, disk_bytes=DISK) as store:  # a restart: only the disk is left
        engine = engine_for(model, store, policy=SnapshotPolicy())
        result = engine.prepare(*flat(main), stepped=main_steps)
        assert result.tokens_evaluated == 0  # the tip of the branch left is still there
        logits, _ = reference(model, main, stepped=main_steps)
        assert result.logits is not None and np.array_equal(result.logits, logits)
        engine.ctx.close()
