"""Every branch point survives a restart, within the bound of its memory kind.

A chat is written by another process (turn by turn, as the app does, or in one prefill,
as an imported chat is); each gesture then runs in fresh objects, nothing in RAM, and
must evaluate its new tokens plus at most ``restart_spacing`` of the kind (a plain model:
nothing), with logits bit-identical to a recompute.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sessions.branching.snapshot_policy import RECURRENT_SPACING, SnapshotPolicy, restart_spacing, segment_interval
from sessions.checkpoints import CheckpointStore, prefix_hash
from sessions.llama.sampler import Sampler
from sessions.memory_kind import MemoryKind
from sessions.sampling import SamplingSettings

from .conftest import ARCHS, SWA_WINDOW
from .test_exactness import branch, check, engine_for, flat, toks

REPO = Path(__file__).resolve().parents[2]
BUDGET = dict(ram_bytes=256 << 20, disk_bytes=1 << 30)


def test_spacing_per_memory_kind():
    assert restart_spacing(MemoryKind.PLAIN, 0) is None
    assert restart_spacing(MemoryKind.SWA, 512) == 512
    assert restart_spacing(MemoryKind.HYBRID, 0) == restart_spacing(MemoryKind.RECURRENT, 0) == RECURRENT_SPACING
    assert segment_interval(2048, MemoryKind.PLAIN, 0) == 2048
    assert segment_interval(2048, MemoryKind.SWA, 512) == 512
    assert segment_interval(128, MemoryKind.SWA, 512) == 128  # a closer interval stays
    assert segment_interval(2048, MemoryKind.HYBRID, 0) == RECURRENT_SPACING


def test_the_copy_speed_is_learnt_from_reads_large_enough_to_say():
    policy = SnapshotPolicy(copy_bytes_per_second=1e9)
    assert policy.snapshot_seconds(10_000_000) == 0.01
    policy.timed(1000, 1.0)  # too small to say anything about bandwidth
    assert policy.copy_bytes_per_second == 1e9
    policy.timed(1 << 20, 1.0)
    assert policy.copy_bytes_per_second < 1e9


def bound(model) -> int:
    return restart_spacing(model.info.kind, model.info.n_swa) or 0


def _turn(engine, model, msgs, stepped, user: int | list[int], max_tokens: int = 16):
    """Ask ``user`` after ``msgs`` and take a reply: the branch one turn longer."""
    asked = toks(model, user) if isinstance(user, int) else user
    msgs, stepped = msgs + [asked], stepped + [False]
    result = engine.prepare(*flat(msgs), stepped=stepped, reply_follows=True)
    sampler = Sampler(SamplingSettings(temperature=0.0), model.info.n_vocab)
    reply = engine.generate(result.logits, sampler, max_tokens=max_tokens)
    sampler.close()
    return msgs + [reply.tokens], stepped + [True]


def long_question(model) -> list[int]:
    """A user message longer than the restart spacing of every kind (cut inside)."""
    return toks(model, 3, repeat=-(-(RECURRENT_SPACING + 40) // len(toks(model, 3))))


EVERY_BOUNDARY = SnapshotPolicy(every_boundary=True)
"""A state at every boundary, whatever the spacing: what each route restores is then the
same on any machine."""
SPACED = SnapshotPolicy()
"""States inside a message only where this model's spacing calls for them (the default)."""


def write_chat(model_path: str, folder: str, how: str, out: str, policy: str = "every") -> None:
    """In a process of its own: write a 6-turn chat's checkpoints, and its messages to ``out``."""
    from sessions.llama.model import LlamaModel

    model = LlamaModel(model_path)
    with CheckpointStore(folder, **BUDGET) as store:
        engine = engine_for(model, store, policy=SPACED if policy == "spaced" else EVERY_BOUNDARY)
        msgs, stepped = branch(model, 0), [False]
        questions: list[int | list[int]] = [1, 3, long_question(model), 5, 6, 1]
        if how == "turns":
            for question in questions:
                msgs, stepped = _turn(engine, model, msgs, stepped, question)
        else:  # an imported chat: every message known, one prefill
            for question, answer in zip(questions, (2, 4, 2, 4, 2, 4), strict=True):
                msgs += [toks(model, question) if isinstance(question, int) else question, toks(model, answer)]
            stepped = [False] * len(msgs)
            engine.prepare(*flat(msgs), stepped=stepped)
        store.flush()
    Path(out).write_text(json.dumps({"msgs": msgs, "stepped": stepped}))


def written_chat(model_paths, arch, tmp_path, how, policy: str = "every") -> tuple[list[list[int]], list[bool]]:
    out = tmp_path / "chat.json"
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from tests.engine.test_snapshot_policy import write_chat; write_chat(*sys.argv[2:])")
    subprocess.run([sys.executable, "-c", code, str(REPO), str(model_paths[arch]), str(tmp_path / "ck"), how,
                    str(out), policy], check=True, capture_output=True)
    chat = json.loads(out.read_text())
    return chat["msgs"], chat["stepped"]


def reopened(model, tmp_path, msgs, stepped, new: int = 0, slack: int | None = None):
    """``msgs`` prepared in fresh objects (a restart): exact, and within the bound (or ``slack``)."""
    with CheckpointStore(tmp_path / "ck", **BUDGET) as store:
        engine = engine_for(model, store)
        result = check(engine, model, msgs, stepped=stepped)
        engine.ctx.close()
    most = new + (bound(model) if slack is None else slack)
    assert new <= result.tokens_evaluated <= most, (result.tokens_evaluated, new, most)
    return result


@pytest.mark.parametrize("how", ["turns", "one prefill"])
@pytest.mark.parametrize("arch", ARCHS)
def test_every_gesture_after_a_restart_evaluates_its_new_tokens(model_paths, loaded_models, tmp_path, arch, how):
    """Regenerate the first reply, regenerate the one after the long question, edit the
    second question, switch back to the tip, continue it: each in a new process's
    objects, each evaluating only what is new (snapshots at every boundary)."""
    model = loaded_models[arch]
    msgs, stepped = written_chat(model_paths, arch, tmp_path, how)
    assert reopened(model, tmp_path, msgs[:2], stepped[:2]).tokens_evaluated == 0  # regenerate reply 1
    assert reopened(model, tmp_path, msgs[:6], stepped[:6]).tokens_evaluated == 0  # after the long question
    edit = toks(model, 4)
    assert reopened(model, tmp_path, msgs[:3] + [edit], stepped[:3] + [False], new=len(edit)).tokens_evaluated \
        == len(edit)
    tip = reopened(model, tmp_path, msgs, stepped, new=0)
    assert tip.tokens_restored + tip.plan.tokens_kept == len(flat(msgs)[0]) - tip.tokens_evaluated
    follow = toks(model, 5)
    assert reopened(model, tmp_path, msgs + [follow], stepped + [False], new=len(follow)).tokens_evaluated \
        == len(follow)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_missing_snapshot_costs_at_most_the_spacing(model_paths, loaded_models, tmp_path, arch):
    """With the snapshot at a branch point gone (evicted), the restore starts from the
    one before: inside a long message that is at most the kind's spacing back."""
    model = loaded_models[arch]
    msgs, stepped = written_chat(model_paths, arch, tmp_path, "turns")
    prompt, prompt_stepped = msgs[:6], stepped[:6]  # ends with the long question
    tokens = flat(prompt)[0]
    with CheckpointStore(tmp_path / "ck", **BUDGET) as store:
        compat = engine_for(model, store).compat
        store.drop_from_disk(compat, prefix_hash(tokens), "snapshot")
        store.flush()
    # A plain model's cells reach the end, but its logits there were the snapshot: it
    # decodes the last segment again (the same batches as a recompute, for the same bits).
    interval = segment_interval(2048, model.info.kind, model.info.n_swa)
    result = reopened(model, tmp_path, prompt, prompt_stepped, slack=min(interval, len(prompt[-1])))
    assert result.tokens_evaluated > 0  # the snapshot really was gone
    if model.info.kind is not MemoryKind.PLAIN:
        assert result.tokens_evaluated <= bound(model)


def test_every_boundary_of_a_chat_has_a_snapshot_on_disk(model_paths, loaded_models, tmp_path):
    """The sliding-window model of the tests (window of 32) keeps a window at every
    message end and every 32 tokens inside the long question, on disk."""
    model = loaded_models["gemma3"]
    assert model.info.n_swa == SWA_WINDOW
    msgs, stepped = written_chat(model_paths, "gemma3", tmp_path, "one prefill")
    from sessions.branching.segments import segment_boundaries

    tokens, ends = flat(msgs)
    bounds = segment_boundaries(ends, SWA_WINDOW)
    assert len(bounds) > len(ends)  # the long question is cut inside
    with CheckpointStore(tmp_path / "ck", **BUDGET) as store:
        compat = engine_for(model, store).compat
        assert store.flush(30)  # the index is built from the folder
        missing = [b for b in bounds if not store.persisted(compat, prefix_hash(tokens[:b]), "snapshot")]
    assert missing == []
    assert np.all(np.diff(bounds) <= SWA_WINDOW)


@pytest.mark.parametrize("arch", ["gemma3", "lfm2", "mamba"])
def test_a_spaced_prefill_still_keeps_the_bound(model_paths, loaded_models, tmp_path, arch):
    """With states inside a message only at this model's spacing (the default), the
    prefill skips those the bound can spare: after a restart a gesture evaluates its new
    tokens plus at most the spacing, never the prefix."""
    model = loaded_models[arch]
    msgs, stepped = written_chat(model_paths, arch, tmp_path, "one prefill", policy="spaced")
    reopened(model, tmp_path, msgs[:2], stepped[:2])  # regenerate reply 1: within the bound
    edit = toks(model, 4)
    reopened(model, tmp_path, msgs[:3] + [edit], stepped[:3] + [False], new=len(edit))
    reopened(model, tmp_path, msgs[:9] + [edit], stepped[:9] + [False], new=len(edit))
