"""Over RPC, every restore route gives exactly what a from-scratch recompute gives.

The tiny models of the four memory kinds are split over the local CPU and two loopback
RPC servers (see ``conftest``), and driven through the engine's public API in its child
process (``EngineProcess``, the way the app runs an RPC model). For each route (from
scratch with checkpointing on, live reuse, restore from RAM, restore from disk in a new
engine process, a generated reply restored and continued) the logits after the branch and
a greedy continuation must be bit-identical to a recompute from token 0 on the same split.

An RPC server serves one client at a time, so the reference engine computes every branch
first and is closed before the engine under test connects.
"""

from __future__ import annotations

import numpy as np
import pytest

from sessions.branching.segments import message_ends
from sessions.engine.process import EngineProcess
from sessions.sampling import SamplingSettings
from tests.engine.test_exactness import TEXTS

from .conftest import ARCHS, ROUTE_ARCHS, split_settings, tiny_model

pytestmark = [pytest.mark.rpc, pytest.mark.engine]

GREEDY = SamplingSettings(temperature=0.0)
ROUTES = ("scratch", "live", "ram", "disk_new_process", "generated_reply")


def branch(engine, *indices: int) -> list[list[int]]:
    return [engine.tokenize(TEXTS[i], i == 0) for i in indices]


def flat(msgs: list[list[int]]) -> tuple[list[int], list[int]]:
    return [t for m in msgs for t in m], message_ends([len(m) for m in msgs])


def continuation(engine, logits) -> list[int]:
    return engine.generate(logits, GREEDY, max_tokens=16).tokens


def from_scratch(ref: EngineProcess, msgs, stepped=None):
    """Logits and greedy continuation of a recompute from token 0 (proved by the counts)."""
    tokens, ends = flat(msgs)
    ref.prepare([(tokens[0] + 1) % ref.info.n_vocab], [1])  # shares no prefix: the next prepare starts at 0
    result = ref.prepare(tokens, ends, stepped)
    assert result.tokens_evaluated == len(tokens) and result.tokens_restored == 0
    return result.logits, continuation(ref, result.logits)


class References:
    """Every branch the routes need, computed from scratch on the split, tokens included."""

    def __init__(self, arch: str, endpoints):
        self.arch, self.endpoints = arch, endpoints
        self.path = tiny_model(arch)
        ref = EngineProcess(self.path, split_settings(arch, endpoints), checkpoint_dir=None)
        try:
            self.placement = ref.placement
            self.ab = branch(ref, 0, 1, 2, 3)
            self.a = self.ab[:3]
            self.edit = branch(ref, 0, 5)
            self.abd = self.ab + branch(ref, 4)
            self.q6 = branch(ref, 6)
            self.logits = {name: from_scratch(ref, msgs) for name, msgs in
                           (("a", self.a), ("ab", self.ab), ("abd", self.abd))}
            prep = ref.prepare(*flat(self.ab))
            self.reply = ref.generate(prep.logits, GREEDY, max_tokens=40).tokens
            self.abrc = self.ab + [self.reply] + self.q6
            self.stepped = [False] * len(self.ab) + [True, False]
            self.logits["abrc"] = from_scratch(ref, self.abrc, self.stepped)
        finally:
            ref.close()

    def engine(self, checkpoint_dir) -> EngineProcess:
        return EngineProcess(self.path, split_settings(self.arch, self.endpoints), checkpoint_dir=checkpoint_dir)


_references: dict[str, References] = {}


@pytest.fixture
def refs(shared_pair, request) -> References:
    arch = request.param
    if arch not in _references:
        _references[arch] = References(arch, shared_pair.endpoints)
    return _references[arch]


def same(engine, result, expected) -> None:
    logits, greedy = expected
    diff = float(np.max(np.abs(result.logits - logits)))
    assert np.array_equal(result.logits, logits), f"max abs difference {diff}"
    assert continuation(engine, result.logits) == greedy


@pytest.mark.parametrize("refs", ARCHS, indirect=True)
def test_the_split_uses_the_cpu_and_both_servers(refs):
    layers = refs.placement.layers
    assert layers[0] == "CPU"
    assert {f"RPC[{e}]" for e in refs.endpoints} <= set(layers)
    assert refs.placement.rpc_endpoints == refs.endpoints


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("refs", ROUTE_ARCHS, indirect=True)
def test_route_is_bit_identical_to_a_recompute(refs, route, tmp_path):
    ck = tmp_path / "ck"
    engine = refs.engine(ck)
    try:
        if route == "scratch":
            result = engine.prepare(*flat(refs.ab))
            assert result.tokens_evaluated == len(flat(refs.ab)[0])
            same(engine, result, refs.logits["ab"])
        elif route == "live":
            engine.prepare(*flat(refs.a))
            result = engine.prepare(*flat(refs.ab))
            assert result.plan.tokens_kept == len(flat(refs.a)[0])
            assert result.tokens_evaluated == len(refs.ab[-1])
            same(engine, result, refs.logits["ab"])
        elif route == "ram":
            engine.prepare(*flat(refs.ab))
            engine.prepare(*flat(refs.edit))
            result = engine.prepare(*flat(refs.ab))
            assert result.tokens_evaluated == 0 and result.tokens_restored > 0
            assert result.plan.disk_bytes == 0  # all of it from RAM (or the parked branch)
            same(engine, result, refs.logits["ab"])
        elif route == "disk_new_process":
            engine.prepare(*flat(refs.ab))
            engine.close()  # the child finishes its checkpoint writes, then exits
            engine = refs.engine(ck)
            result = engine.prepare(*flat(refs.abd))
            assert result.tokens_evaluated == len(refs.abd[-1])
            assert result.plan.disk_bytes > 0 and result.plan.ram_bytes == 0
            same(engine, result, refs.logits["abd"])
        elif route == "generated_reply":
            prep = engine.prepare(*flat(refs.ab))
            assert engine.generate(prep.logits, GREEDY, max_tokens=40).tokens == refs.reply
            engine.prepare(*flat(refs.edit))  # somewhere else
            result = engine.prepare(*flat(refs.abrc), refs.stepped)
            assert result.tokens_evaluated == len(refs.q6[0])
            same(engine, result, refs.logits["abrc"])
    finally:
        engine.close()


@pytest.mark.parametrize("refs", ARCHS, indirect=True)
def test_the_split_computes_the_bits_of_the_local_cpu(refs):
    """Measured: on CPU servers the split changes no bit (so a session reopened locally,
    recomputed there, continues with the same numbers); states still never cross splits."""
    from sessions.engine.chat_engine import LlamaChatEngine
    from sessions.llama.context import ContextParams

    s = split_settings(refs.arch, refs.endpoints)
    local = LlamaChatEngine(refs.path, ContextParams(n_ctx=s.n_ctx, n_batch=s.n_batch, n_threads=1))
    try:
        result = local.prepare(*flat(refs.ab))
        assert local.ctx.params.devices == ""
        same(local, result, refs.logits["ab"])
    finally:
        local.close()


@pytest.mark.parametrize("refs", ["llama", "lfm2"], indirect=True)
def test_states_saved_over_rpc_are_not_restored_on_another_split(refs, tmp_path):
    from sessions.checkpoints import CheckpointStore
    from sessions.engine.chat_engine import LlamaChatEngine
    from sessions.llama.context import ContextParams

    engine = refs.engine(tmp_path / "ck")
    try:
        engine.prepare(*flat(refs.ab))
    finally:
        engine.close()
    with CheckpointStore(tmp_path / "ck", ram_bytes=64 << 20, disk_bytes=1 << 30) as store:
        local = LlamaChatEngine(refs.path, ContextParams(n_ctx=2048, n_batch=64, n_threads=1), checkpoints=store)
        try:
            result = local.prepare(*flat(refs.ab))
        finally:
            local.close()
    assert result.tokens_restored == 0 and result.tokens_evaluated == len(flat(refs.ab)[0])
