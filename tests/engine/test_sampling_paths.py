"""A reply sampled through llama.cpp's own candidate array is the reply the numpy array gives.

``BranchEngine.generate`` lets llama.cpp fill the sampler's array from the context for every
token after the first (``LlamaContext.sample_last``); the first, and any logits restored
from a checkpoint, go through ``Sampler``'s numpy array. Same array, same chain, same
seed: the same tokens, which this checks on a real model.
"""

from __future__ import annotations

import pytest

from sessions.llama.sampler import Sampler
from sessions.sampling import SamplingSettings

from .test_exactness import branch, engine_for, flat

SETTINGS = [
    SamplingSettings(temperature=0.9, seed=5),  # the defaults: top-k 40, top-p 0.95, min-p 0.05
    SamplingSettings(temperature=1.3, top_k=0, top_p=1.0, min_p=0.0, seed=11),  # the whole vocabulary
    SamplingSettings(temperature=0.7, top_k=5, seed=3, repeat_penalty=1.2, repeat_last_n=16),
    SamplingSettings(temperature=0.0, repeat_penalty=1.1),  # greedy through the chain (a penalty)
]


def numpy_reply(engine, logits, settings, n: int) -> list[int]:
    """The reference: every token from ``Sampler``'s numpy array."""
    sampler = Sampler(settings, engine.model.info.n_vocab)
    out, pos = [], len(engine.live)
    try:
        for _ in range(n):
            token = sampler.sample(logits)
            if engine.model.is_eog(token):
                break
            out.append(token)
            logits = engine.ctx.decode([token], pos)
            pos += 1
    finally:
        sampler.close()
    return out


@pytest.mark.parametrize("settings", SETTINGS, ids=["defaults", "whole vocabulary", "penalised", "greedy chain"])
def test_context_filled_sampling_picks_the_numpy_tokens(loaded_models, settings):
    model = loaded_models["llama"]
    msgs = flat(branch(model, 0, 1))
    generated = engine_for(model, None)
    sampler = Sampler(settings, model.info.n_vocab)
    try:
        reply = generated.generate(generated.prepare(*msgs).logits, sampler, max_tokens=40)
    finally:
        sampler.close()
        generated.ctx.close()
    reference = engine_for(model, None)
    try:
        expected = numpy_reply(reference, reference.prepare(*msgs).logits, settings, 40)
    finally:
        reference.ctx.close()
    assert len(reply.tokens) > 5
    assert reply.tokens == expected


def test_no_logits_in_the_context_falls_back_to_the_given_ones(loaded_models):
    """A decode that kept no logits: the sampler uses the array it was given."""
    model = loaded_models["llama"]
    engine = engine_for(model, None)
    tokens, ends = flat(branch(model, 0))
    try:
        logits = engine.prepare(tokens, ends).logits
        engine.ctx.decode([tokens[-1]], len(tokens), want_logits=False)
        assert engine.ctx.sample_last(Sampler(SamplingSettings(seed=1), model.info.n_vocab)._chain) is None
        settings = SamplingSettings(temperature=0.8, seed=2)
        a, b = Sampler(settings, model.info.n_vocab), Sampler(settings, model.info.n_vocab)
        assert a.sample(logits, output_of=engine.ctx) == b.sample(logits)
        a.close()
        b.close()
    finally:
        engine.ctx.close()
