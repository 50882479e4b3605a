"""Several versions of a reply in one batch: the prompt evaluated once, and every version,
once made live the way a rebuild makes it, continued exactly after a reopen."""

from __future__ import annotations

import numpy as np
import pytest

from sessions.branching.versions import sample_versions
from sessions.checkpoints import CheckpointStore
from sessions.llama.batch_context import BatchContext
from sessions.llama.sampler import Sampler
from sessions.sampling import SamplingSettings

from .conftest import ARCHS
from .test_exactness import branch, check, engine_for, flat

N, TOKENS = 3, 24


def samplers(model, n: int = N, seed: int = 11) -> list[Sampler]:
    return [Sampler(SamplingSettings(temperature=0.9, top_k=0, top_p=1.0, min_p=0.0, seed=seed + k),
                    model.info.n_vocab) for k in range(n)]


def one_version(model, engine, msgs):
    """``msgs`` made live, then one version after them in a batch of one: what ``prepare``
    did, and the version."""
    prep = engine.prepare(*flat(msgs), reply_follows=True)
    (sampler,) = samplers(model, 1)
    (version,) = sample_versions(engine, prep.logits, [sampler], max_tokens=TOKENS)
    sampler.close()
    return prep, version


@pytest.mark.parametrize("arch", ARCHS)
def test_versions_share_the_prompt_and_each_continues_exactly_after_a_reopen(loaded_models, tmp_path, monkeypatch,
                                                                             arch):
    model = loaded_models[arch]
    msgs = branch(model, 0, 1, 2, 3)
    steps: list[list[tuple[int, int, int]]] = []
    real_step = BatchContext.step
    monkeypatch.setattr(BatchContext, "step", lambda self, items: (steps.append(list(items)), real_step(self, items)))
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as first:
        engine = engine_for(model, first)
        prep = engine.prepare(*flat(msgs), reply_follows=True)
        assert prep.tokens_evaluated == len(flat(msgs)[0])
        decoded_before = engine.ctx.decode_seconds
        chosen = samplers(model)
        versions = sample_versions(engine, prep.logits, chosen, max_tokens=TOKENS)
        for sampler in chosen:
            sampler.close()
        # The app's context decoded nothing more; the batch only the versions' own tokens.
        assert engine.ctx.decode_seconds == decoded_before
        assert engine.live == flat(msgs)[0]
        start = len(engine.live)
        assert all(len(step) <= N and [pos for _, pos, _ in step] == [start + i] * len(step)
                   for i, step in enumerate(steps))
        assert sorted({seq for step in steps for _, _, seq in step}) == list(range(N))
        assert len(steps) == max(len(v.tokens) for v in versions)
        assert len({tuple(v.tokens) for v in versions}) > 1  # seeds apart: other replies
        for version in versions:  # made live as a rebuild makes a reply not sampled alone
            engine.prepare(*flat(msgs), need_logits=False)  # from the question (``versions.settle``)
            settled = engine.prepare(*flat(msgs + [version.tokens]), stepped=[False] * 5)
            assert settled.tokens_evaluated == len(version.tokens)
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as second:
        engine = engine_for(model, second)
        for version in versions:
            result = check(engine, model, msgs + [version.tokens] + branch(model, 5), stepped=[False] * 6)
            assert result.tokens_evaluated == len(branch(model, 5)[0])


def test_a_version_at_a_fixed_seed_in_a_batch_of_one_is_the_reply_sampled_alone(loaded_models, store):
    """The batch route itself adds nothing: one version alone in it samples the tokens
    that ``generate`` samples with the same seed (only batches of several differ)."""
    model = loaded_models["llama"]
    msgs = branch(model, 0, 1)
    engine = engine_for(model, store)
    prep, batched = one_version(model, engine, msgs)
    (again,) = samplers(model, 1)
    alone = engine.generate(engine.prepare(*flat(msgs)).logits, again, max_tokens=TOKENS)
    again.close()
    assert batched.tokens == alone.tokens and batched.text == alone.text
    assert np.array_equal(engine.prepare(*flat(msgs)).logits, prep.logits)


@pytest.fixture
def store(tmp_path):
    with CheckpointStore(tmp_path / "ck", ram_bytes=256 << 20, disk_bytes=1 << 30) as s:
        yield s


def test_a_cut_inside_a_batch_decoded_reply_is_planned_and_made_from_its_start(loaded_models, store):
    """Cut inside a live reply that was decoded as a batch, the branch is decoded from the
    reply's start, as a rebuild decodes it, and ``plan`` told ``stepped`` says so; told
    nothing it prices the one-token cut a stepped reply would take."""
    model = loaded_models["llama"]
    msgs = branch(model, 0, 1)
    engine = engine_for(model, store)
    _, version = one_version(model, engine, msgs)
    engine.prepare(*flat(msgs + [version.tokens]), stepped=[False] * 3)
    cut = msgs + [version.tokens[:10]]
    start = len(flat(msgs)[0])
    assert engine.plan(*flat(cut)).keep == start + 9  # a stepped reply's route
    planned = engine.plan(*flat(cut), stepped=[False] * 3)
    made = check(engine, model, cut, stepped=[False] * 3)
    assert planned.keep == made.plan.keep == start and made.tokens_evaluated == 10
