"""When snapshots are taken and which stay on disk: the rule, and a chat turn by turn."""

from __future__ import annotations

import numpy as np

from sessions.checkpoints import CheckpointStore
from sessions.engine.sampler import Sampler
from sessions.engine.snapshot_policy import SnapshotPolicy
from sessions.sampling import SamplingSettings

from .test_exactness import branch, engine_for, flat, reference, toks


def test_due_weighs_the_copy_against_the_decoding_it_saves():
    policy = SnapshotPolicy(overhead=0.02, copy_bytes_per_second=1e9)
    assert policy.snapshot_seconds(10_000_000) == 0.01
    assert not policy.due(0.4, 10_000_000, tokens_since=1000)  # 2% of 0.4 s < 10 ms
    assert policy.due(0.5, 10_000_000, tokens_since=1000)
    assert not policy.due(10.0, 10_000_000, tokens_since=100, min_tokens=512)  # inside one window
    assert SnapshotPolicy(every_boundary=True).due(0.0, 1 << 30, tokens_since=0)
    assert not SnapshotPolicy(overhead=0.0).due(1e6, 1, tokens_since=1 << 20)


def test_persist_keeps_snapshots_a_share_of_the_cells():
    policy = SnapshotPolicy(disk_share=0.5)
    assert not policy.persist(1_000_000, 600_000)
    assert policy.persist(1_200_000, 600_000)
    assert SnapshotPolicy(every_boundary=True).persist(0, 600_000)


def test_timing_learns_the_copy_speed_from_large_reads_only():
    policy = SnapshotPolicy(copy_bytes_per_second=5e9)
    policy.timed(1000, 1.0)  # too small to say anything
    assert policy.copy_bytes_per_second == 5e9
    policy.timed(1 << 30, 1.0)
    assert policy.copy_bytes_per_second < 5e9


def test_a_long_chat_keeps_few_snapshots_on_disk_and_stays_exact(loaded_models, tmp_path):
    """Turn by turn, each prompt end and reply tip goes to disk and the previous ones leave
    it, but for snapshots a spacing apart; a reopened chat still continues (and
    regenerates) exactly."""
    model = loaded_models["gemma3"]
    msgs = branch(model, 0)
    stepped = [False]
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store, policy=SnapshotPolicy())
        for turn in range(10):
            msgs, stepped = msgs + branch(model, 1 + turn % 6), stepped + [False]
            result = engine.prepare(*flat(msgs), stepped=stepped, reply_follows=True)
            sampler = Sampler(SamplingSettings(temperature=0.0), model.info.n_vocab)
            reply = engine.generate(result.logits, sampler, max_tokens=16)
            sampler.close()
            msgs, stepped = msgs + [reply.tokens], stepped + [True]
        store.flush()
        files = list((tmp_path / "ck").glob("*/*.snap"))
        tokens = len(flat(msgs)[0])
        window = engine.ctx.state_size(0, 1)
        cells_per_token = sum(p.stat().st_size for p in (tmp_path / "ck").glob("*/*.ckpt")) / tokens
        spacing = 2 * window / cells_per_token
        assert 2 <= len(files) <= tokens / spacing + 3, (len(files), tokens, spacing)
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store, policy=SnapshotPolicy())
        follow = msgs + branch(model, 3)
        result = engine.prepare(*flat(follow), stepped=stepped + [False])
        assert result.tokens_evaluated == len(toks(model, 3))  # the last tip is on disk
        logits, _ = reference(model, follow, stepped=stepped + [False])
        assert np.array_equal(result.logits, logits)
        regenerate = msgs[:-1]  # the last reply's prompt: its end is on disk too
        result = engine.prepare(*flat(regenerate), stepped=stepped[:-1])
        assert result.tokens_evaluated == 0
        logits, _ = reference(model, regenerate, stepped=stepped[:-1])
        assert np.array_equal(result.logits, logits)


def _turn(engine, model, msgs, stepped, user: int):
    """Ask ``user`` after ``msgs`` and take a 16-token reply: the branch one turn longer."""
    msgs, stepped = msgs + branch(model, user), stepped + [False]
    result = engine.prepare(*flat(msgs), stepped=stepped, reply_follows=True)
    sampler = Sampler(SamplingSettings(temperature=0.0), model.info.n_vocab)
    reply = engine.generate(result.logits, sampler, max_tokens=16)
    sampler.close()
    return msgs + [reply.tokens], stepped + [True]


def test_going_back_and_forth_keeps_one_prompt_end_and_tip_per_branch(loaded_models, tmp_path):
    """Two branches extended in turn, restarted twice: each visit's prompt end and tip
    replace the ones the branch had (their files say which they are), instead of a pair
    staying behind per visit or per restart."""
    model = loaded_models["gemma3"]
    main, main_steps = branch(model, 0), [False]
    for restart in range(3):
        with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
            engine = engine_for(model, store, policy=SnapshotPolicy())  # a new process, in effect
            if restart == 0:
                main, main_steps = _turn(engine, model, main, main_steps, 1)
                other, other_steps = _turn(engine, model, main[:1], [False], 2)  # an edit of the first question
            for turn in range(2 * restart, 2 * restart + 2):
                main, main_steps = _turn(engine, model, main, main_steps, 3 + turn % 3)
                other, other_steps = _turn(engine, model, other, other_steps, 4 + turn % 2)
            window = engine.ctx.state_size(0, 1)
            engine.ctx.close()
    snaps = list((tmp_path / "ck").glob("*/*.snap"))
    unique = len(flat(main)[0]) + len(flat(other)[0]) - len(flat(main[:1])[0])
    cells_per_token = sum(p.stat().st_size for p in (tmp_path / "ck").glob("*/*.ckpt")) / unique
    spacing = 2 * window / cells_per_token  # the disk rule's (disk_share 0.5)
    kept_for_good = unique / spacing + 2  # one per spacing on each branch
    assert len(snaps) <= kept_for_good + 2 * 2, (len(snaps), unique, spacing)  # + prompt end, tip each
    # Both tips are still on disk: a restart continues either branch without decoding.
    for msgs, steps in ((main, main_steps), (other, other_steps)):
        with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
            engine = engine_for(model, store, policy=SnapshotPolicy())
            result = engine.prepare(*flat(msgs), stepped=steps)
            assert result.tokens_evaluated == 0
            logits, _ = reference(model, msgs, stepped=steps)
            assert np.array_equal(result.logits, logits)
            engine.ctx.close()
