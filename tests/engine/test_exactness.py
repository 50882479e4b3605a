"""Every way of restoring a branch gives exactly what a from-scratch recompute gives.

For each memory kind and each route (live reuse, cut, RAM restore, disk restore,
segments shared with a sibling, a new process, a checkpoint inside a long message) the
logits before the first generated token and a 32-token greedy continuation must be
bit-identical to a fresh context that evaluates the whole branch from token 0.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from sessions.branching.branch_engine import BranchEngine
from sessions.branching.segments import message_ends
from sessions.branching.snapshot_policy import SnapshotPolicy
from sessions.checkpoints import CheckpointStore
from sessions.llama.context import ContextParams, LlamaContext
from sessions.memory_kind import MemoryKind
from sessions.stop_reason import StopReason
from tests.threads import TEST_THREADS

from .conftest import ALL_ARCHS, ARCHS, greedy_after

PARAMS = ContextParams(n_ctx=2048, n_batch=64, n_threads=TEST_THREADS)
TEXTS = [
    "You are a helpful assistant who answers briefly.",
    "Tell me about the sea and the boats that sail on it at night.",
    "The sea is wide and the boats carry lights so that others can see them.",
    "And what about the stars above the water?",
    "Stars guide the sailors; they read them like a map of the sky.",
    "Write a short poem about a lighthouse keeper and his cat.",
    "A different question: how do birds find their way home in winter?",
]


def toks(model, i: int, repeat: int = 1) -> list[int]:
    return model.tokenize(" ".join([TEXTS[i % len(TEXTS)]] * repeat), add_bos=(i == 0))


def branch(model, *indices: int, repeat: dict[int, int] | None = None) -> list[list[int]]:
    repeat = repeat or {}
    return [toks(model, i, repeat.get(i, 1)) for i in indices]


def flat(msgs: list[list[int]]) -> tuple[list[int], list[int]]:
    return [t for m in msgs for t in m], message_ends([len(m) for m in msgs])


DENSE = SnapshotPolicy(every_boundary=True)
"""Snapshots at every boundary, as the engine takes them (``boundaries=False`` reaches the
routes that must do without); exactness does not depend on where they are."""


def engine_for(model, store, interval: int = 2048, policy: SnapshotPolicy = DENSE,
               params: ContextParams = PARAMS) -> BranchEngine:
    return BranchEngine(model, LlamaContext(model, params), store, interval=interval, policy=policy)


def reference(model, msgs, interval: int = 2048, stepped=None, params: ContextParams = PARAMS):
    """A fresh context that evaluates the whole branch from token 0, no checkpoints."""
    engine = engine_for(model, None, interval, params=params)
    tokens, ends = flat(msgs)
    result = engine.prepare(tokens, ends, stepped=stepped)
    greedy = greedy_after(engine, result.logits)
    engine.ctx.close()
    return result.logits, greedy


def check(engine, model, msgs, interval: int = 2048, stepped=None):
    """``engine`` prepares ``msgs``; its logits and continuation must be a recompute's,
    in a context made as ``engine``'s was."""
    tokens, ends = flat(msgs)
    result = engine.prepare(tokens, ends, stepped=stepped)
    logits, greedy = reference(model, msgs, interval, stepped, params=engine.ctx.params)
    assert np.array_equal(result.logits, logits), f"max diff {np.abs(result.logits - logits).max()}"
    assert greedy_after(engine, result.logits) == greedy
    return result


@pytest.fixture
def store(tmp_path):
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as s:
        yield s


@pytest.mark.parametrize("arch", ARCHS)
def test_reuse_live_prefix(loaded_models, store, arch):
    model = loaded_models[arch]
    engine = engine_for(model, store)
    base = branch(model, 0, 1, 2)
    engine.prepare(*flat(base))
    result = check(engine, model, base + branch(model, 3))
    assert result.plan.tokens_kept == len(flat(base)[0])
    assert result.tokens_evaluated == len(toks(model, 3))


@pytest.mark.parametrize("arch", ARCHS)
def test_switch_back_restores_from_ram(loaded_models, store, arch):
    model = loaded_models[arch]
    engine = engine_for(model, store)
    original = branch(model, 0, 1, 2, 3)
    edited = branch(model, 0, 5)  # an edit of user turn 1
    engine.prepare(*flat(original))
    engine.prepare(*flat(edited))
    result = check(engine, model, original)
    assert result.tokens_evaluated == 0  # every segment was saved, logits included
    assert result.tokens_restored + result.plan.tokens_kept == len(flat(original)[0])


@pytest.mark.parametrize("arch", ARCHS)
def test_sibling_shares_segments(loaded_models, store, arch):
    model = loaded_models[arch]
    engine = engine_for(model, store)
    engine.prepare(*flat(branch(model, 0, 1, 2, 3)))
    engine.prepare(*flat(branch(model, 0, 6)))
    result = check(engine, model, branch(model, 0, 1, 2, 4))
    assert result.tokens_evaluated == len(toks(model, 4))


@pytest.mark.parametrize("arch", ARCHS)
def test_restore_from_disk(loaded_models, tmp_path, arch):
    model = loaded_models[arch]
    msgs = branch(model, 0, 1, 2, 3)
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as first:
        engine_for(model, first).prepare(*flat(msgs))
        first.flush()
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as second:
        engine = engine_for(model, second)
        result = check(engine, model, msgs + branch(model, 4))
        assert result.tokens_evaluated == len(toks(model, 4))
        assert all(info.tier == "disk" for info in result.plan.restore)


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_restore_after_process_restart(model_paths, loaded_models, tmp_path, arch):
    """Checkpoints written by another process restore exactly in this one."""
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(__import__('pathlib').Path(__file__).resolve().parents[2])!r})
        from tests.engine.test_exactness import branch, engine_for, flat
        from sessions.checkpoints import CheckpointStore
        from sessions.llama.model import LlamaModel
        model = LlamaModel({str(model_paths[arch])!r})
        with CheckpointStore({str(tmp_path / 'ck')!r}, ram_bytes=1 << 28, disk_bytes=1 << 30) as s:
            engine_for(model, s).prepare(*flat(branch(model, 0, 1, 2, 3)))
        """
    )
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True)
    model = loaded_models[arch]
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store)
        result = check(engine, model, branch(model, 0, 1, 2, 3, 5))
        assert result.tokens_evaluated == len(toks(model, 5))


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_checkpoint_inside_long_message(loaded_models, store, arch):
    """Editing the end of a long message resumes from the checkpoint inside it."""
    model = loaded_models[arch]
    interval = 32
    engine = engine_for(model, store, interval)
    long_text = toks(model, 5, repeat=6)
    engine.prepare(*flat(branch(model, 0) + [long_text]))
    head = len(toks(model, 0))
    edited = long_text[: 3 * interval + 5] + toks(model, 4)
    result = check(engine, model, branch(model, 0) + [edited], interval)
    reused = result.plan.tokens_kept + result.tokens_restored
    assert reused == head + 3 * interval
    assert result.tokens_evaluated == len(edited) - 3 * interval


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_generated_reply_then_continue(loaded_models, store, arch):
    """A reply decoded token by token, restored later, equals the from-scratch branch."""
    from sessions.llama.sampler import Sampler
    from sessions.sampling import SamplingSettings

    model = loaded_models[arch]
    engine = engine_for(model, store)
    msgs = branch(model, 0, 1)
    result = engine.prepare(*flat(msgs))
    sampler = Sampler(SamplingSettings(temperature=0.0), model.info.n_vocab)
    reply = engine.generate(result.logits, sampler, max_tokens=40)
    sampler.close()
    assert reply.tokens
    with_reply = msgs + [reply.tokens]
    engine.prepare(*flat(branch(model, 0, 6)))  # somewhere else
    follow_up = with_reply + branch(model, 3)
    res = check(engine, model, follow_up, stepped=[False, False, True, False])
    assert res.tokens_evaluated == len(toks(model, 3))


@pytest.mark.parametrize("arch", ARCHS)
def test_a_continued_reply_restores_in_the_next_process_without_replaying(loaded_models, tmp_path, arch):
    """A reply cut, then continued past a segment boundary: its checkpoints are cut where a
    reopened branch looks for them (from the reply's start), so all of it restores."""
    from sessions.llama.sampler import Sampler
    from sessions.sampling import SamplingSettings

    model, interval = loaded_models[arch], 16
    msgs = branch(model, 0, 1)
    sampler = Sampler(SamplingSettings(temperature=0.0), model.info.n_vocab)
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as first:
        engine = engine_for(model, first, interval)
        cut = engine.generate(engine.prepare(*flat(msgs), reply_follows=True).logits, sampler, max_tokens=6)
        again = engine.prepare(*flat(msgs + [cut.tokens]), stepped=[False, False, True], reply_follows=True)
        assert again.tokens_evaluated == 0
        more = engine.generate(again.logits, sampler, max_tokens=20)
        assert (cut.stop_reason, more.stop_reason, len(more.tokens)) == (StopReason.LENGTH,) * 2 + (20,)
    sampler.close()
    longer = msgs + [cut.tokens + more.tokens]
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as second:
        result = check(engine_for(model, second, interval), model, longer, interval, stepped=[False, False, True])
        assert (result.tokens_evaluated, result.plan.keep) == (0, 0)


def test_hybrid_cuts_back_only_to_a_snapshot(loaded_models, store):
    """Attention cells can be cut, the recurrent state cannot: it is put back from a snapshot."""
    model = loaded_models["lfm2"]
    engine = engine_for(model, store)
    engine.prepare(*flat(branch(model, 0, 1, 2)))
    target = branch(model, 0, 5)
    plan = engine.plan(*flat(target))
    assert plan.keep == len(toks(model, 0)) and plan.rewind is not None
    check(engine, model, target)


def test_hybrid_without_a_snapshot_is_rebuilt_not_cut(loaded_models, tmp_path):
    model = loaded_models["lfm2"]
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store, policy=SnapshotPolicy(boundaries=False))  # ends only
        engine.prepare(*flat(branch(model, 0, 1, 2)))
        target = branch(model, 0, 5)
        plan = engine.plan(*flat(target))
        assert plan.keep == 0 and plan.rewind is None
        check(engine, model, target)


LONG = {1: 5, 2: 5, 3: 5, 4: 5}  # repeats: about 500 tokens, past the 256-cell window cache


@pytest.mark.parametrize("pieces", ["kept", "gone"])
def test_swa_slid_window_is_not_cut(loaded_models, tmp_path, pieces):
    """Once the window slid past the branch point, a plain cut would be wrong: the window is
    put back from its pieces there, or, with those gone, the branch is rebuilt."""
    model = loaded_models["gemma3"]
    assert model.info.kind is MemoryKind.SWA
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store if pieces == "kept" else None)
        original = branch(model, 0, 1, 2, 3, 4, repeat=LONG)
        engine.prepare(*flat(original))
        cut_at = len(toks(model, 0))
        assert engine.ctx.pos_min() > cut_at  # the window cache dropped the cells after the cut
        target = branch(model, 0, 6)
        plan = engine.plan(*flat(target))
        if pieces == "kept":
            assert plan.keep == cut_at and plan.rewind is not None
        else:
            assert plan.keep == 0
        check(engine, model, target)


def test_swa_cut_after_slide_is_really_wrong(loaded_models):
    """The hazard the planner avoids: llama.cpp accepts the cut and gives other logits."""
    model = loaded_models["gemma3"]
    engine = engine_for(model, None)
    engine.prepare(*flat(branch(model, 0, 1, 2, 3, 4, repeat=LONG)))
    cut_at = len(toks(model, 0))
    assert engine.ctx.pos_min() > cut_at
    assert engine.ctx.seq_rm(0, cut_at, -1)  # llama.cpp says yes...
    engine.live = engine.live[:cut_at]
    tokens, ends = flat(branch(model, 0, 6))
    logits = engine.ctx.decode(tokens[cut_at:], cut_at)
    good, _ = reference(model, branch(model, 0, 6))
    assert not np.array_equal(logits, good)  # ...but the state was not what it claims


@pytest.mark.parametrize("arch", ALL_ARCHS)
def test_long_branch_past_the_window_cache(loaded_models, store, arch):
    """Past the 256-cell window ring of the sliding-window cache, every route stays exact."""
    model = loaded_models[arch]
    engine = engine_for(model, store)
    original = branch(model, 0, 1, 2, 3, 4, repeat=LONG)
    assert len(flat(original)[0]) > 300
    engine.prepare(*flat(original))
    engine.prepare(*flat(branch(model, 0, 1, 2, 6, repeat=LONG)))  # an edit of turn 3
    result = check(engine, model, original + branch(model, 5))  # back, and one more turn
    assert result.tokens_evaluated == len(toks(model, 5))


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("snapshots", ["dense", "ends only"])
def test_regenerate_after_reopen_cuts_only_into_real_cells(loaded_models, tmp_path, arch, snapshots):
    """A restored window has zero filler before it: cutting back must never unmask that.

    Reopen a long branch with a generated reply (everything from disk), then go back to
    the prompt of that reply, as a regenerate does. Both ends were checkpointed with their
    logits (the prompt's for the reply's first token, the reply's after it), so neither
    step evaluates a token: a restore that silently fell back to a recompute would fail.
    """
    from sessions.llama.sampler import Sampler
    from sessions.sampling import SamplingSettings

    model = loaded_models[arch]
    policy = DENSE if snapshots == "dense" else SnapshotPolicy(boundaries=False)
    prompt = branch(model, 0, 1, 2, 3, 4, repeat=LONG)
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store, policy=policy)
        result = engine.prepare(*flat(prompt), reply_follows=True)
        sampler = Sampler(SamplingSettings(temperature=0.0), model.info.n_vocab)
        reply = engine.generate(result.logits, sampler, max_tokens=20)
        sampler.close()
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store, policy=policy)
        whole = prompt + [reply.tokens]
        reopened = check(engine, model, whole, stepped=[False] * len(prompt) + [True])
        assert (reopened.tokens_restored, reopened.tokens_evaluated) == (len(flat(whole)[0]), 0)
        back = check(engine, model, prompt)
        assert back.tokens_evaluated == 0
        assert back.tokens_restored > 0 and back.plan.tokens_kept + back.tokens_restored == len(flat(prompt)[0])


@pytest.mark.parametrize("arch", ARCHS)
def test_a_switch_that_needs_no_logits_evaluates_nothing(loaded_models, tmp_path, arch):
    """Reopened, a branch whose checkpoints reach its end (but hold no logits there, as
    after a finished reply) is shown without decoding its last message again; the next
    message then evaluates only itself, exactly."""
    from dataclasses import replace

    from sessions.checkpoints import prefix_hash

    model = loaded_models[arch]
    shown, longer = branch(model, 0, 1, 2), branch(model, 0, 1, 2, 3)
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store)
        engine.prepare(*flat(longer))  # checkpoints at every boundary of ``shown``
        store.flush()
        # The end of ``shown`` as a finished reply leaves it: its state, no logits.
        end = prefix_hash(flat(shown)[0])
        snapshot = store.get(engine.compat, end, "snapshot")
        assert snapshot is not None and snapshot.logits is not None
        store.drop_from_disk(engine.compat, end, "snapshot")
        store.flush()
        store.put(replace(snapshot, logits=None))
        store.flush()
        engine.ctx.close()
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as store:
        engine = engine_for(model, store)
        assert engine.plan(*flat(shown)).tokens_to_evaluate > 0  # logits would cost a decode
        plan = engine.plan(*flat(shown), need_logits=False)
        assert (plan.tokens_to_evaluate, plan.logits_source) == (0, "none")
        result = engine.prepare(*flat(shown), need_logits=False)
        assert result.tokens_evaluated == 0 and result.logits is None
        assert result.tokens_restored == len(flat(shown)[0])
        follow = shown + branch(model, 4)
        result = engine.prepare(*flat(follow))
        assert result.tokens_evaluated == len(toks(model, 4))
        logits, greedy = reference(model, follow)
        assert np.array_equal(result.logits, logits)
        assert greedy_after(engine, result.logits) == greedy
        engine.ctx.close()


# What a "continue from here" in the middle of a 40-token reply evaluates, per memory kind:
# attention cells are cut at the token (the last kept one is decoded again, for its
# logits); a sliding window too while the ring still holds the window before the cut; a
# recurrent or hybrid state cannot go back, so it is rebuilt from the reply's start (a
# snapshot inside a reply only comes every ``restart_spacing`` tokens).
CUT_AT = 20
CUT_EVALUATED = {"llama": 1, "gemma3": 1, "lfm2": CUT_AT, "mamba": CUT_AT}


@pytest.mark.parametrize("arch", ARCHS)
def test_a_reply_cut_in_the_middle_goes_on_exactly_evaluating_what_its_kind_needs(loaded_models, tmp_path, arch):
    from sessions.llama.sampler import Sampler
    from sessions.sampling import SamplingSettings

    model = loaded_models[arch]
    msgs = branch(model, 0, 1)
    sampler = Sampler(SamplingSettings(temperature=0.0), model.info.n_vocab)
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as first:
        engine = engine_for(model, first)
        reply = engine.generate(engine.prepare(*flat(msgs), reply_follows=True).logits, sampler, max_tokens=40)
        assert len(reply.tokens) == 40
        cut = msgs + [reply.tokens[:CUT_AT]]
        result = check(engine, model, cut, stepped=[False, False, True])
        assert result.tokens_evaluated == CUT_EVALUATED[arch]
    sampler.close()
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as second:  # a reopen
        result = check(engine_for(model, second), model, cut, stepped=[False, False, True])
        assert result.tokens_evaluated <= CUT_AT


def test_a_reopened_plain_reply_restored_whole_then_cut_is_exact_and_decodes_one_token(loaded_models, tmp_path):
    """The route ``whole_reply_first`` takes after a reopen: the whole reply from its
    checkpoints, cut back to the place chosen, its last kept token decoded again."""
    from sessions.llama.sampler import Sampler
    from sessions.sampling import SamplingSettings

    model = loaded_models["llama"]
    msgs = branch(model, 0, 1)
    sampler = Sampler(SamplingSettings(temperature=0.0), model.info.n_vocab)
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as first:
        engine = engine_for(model, first)
        reply = engine.generate(engine.prepare(*flat(msgs), reply_follows=True).logits, sampler, max_tokens=40)
        engine.ctx.close()
    sampler.close()
    stepped = [False, False, True]
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as second:
        engine = engine_for(model, second)
        whole = engine.prepare(*flat(msgs + [reply.tokens]), stepped=stepped, need_logits=False)
        assert whole.tokens_evaluated == 0 and whole.tokens_restored == len(flat(msgs)[0]) + 40
        result = check(engine, model, msgs + [reply.tokens[:CUT_AT]], stepped=stepped)
        assert result.tokens_evaluated == 1
        engine.ctx.close()
