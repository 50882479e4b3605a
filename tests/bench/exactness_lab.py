"""What the restore routes of ``gpu_exactness`` are made of: a model loaded as llamachat
loads it, its messages, and the comparison with a from-scratch recompute."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tests.bench.workload import text_of

if TYPE_CHECKING:
    from sessions.branching.branch_engine import PrepareResult

GREEDY = 16
"""Greedy tokens compared past each branch: a state that is off shows in later logits too."""
N_CTX, N_BATCH = 8192, 512
"""The benchmarks' context: the batch decides which kernels run, so it is theirs."""
RAM_BYTES, DISK_BYTES = 8 << 30, 50 << 30

Msgs = list[list[int]]


def flat(msgs: Msgs) -> tuple[list[int], list[int]]:
    from sessions.branching.segments import message_ends

    return [t for m in msgs for t in m], message_ends([len(m) for m in msgs])


def ring_cells(n_swa: int) -> int:
    """llama.cpp's sliding-window cache with ``swa_full`` off: 2 windows and a micro-batch, in 256s."""
    return -(-(2 * n_swa + N_BATCH) // 256) * 256


class Lab:
    """One model loaded as llamachat loads it, and the messages the routes are made of."""

    def __init__(self, arch: str, path: Path, ngl, threads: int, root: Path):
        from sessions.engine.chat_engine import LlamaChatEngine
        from sessions.llama.context import ContextParams

        self.arch, self.path, self.ngl, self.threads, self.root = arch, path, ngl, threads, root
        t0 = time.perf_counter()
        self.engine = LlamaChatEngine(path, ContextParams(n_ctx=N_CTX, n_batch=N_BATCH, n_threads=threads),
                                      n_gpu_layers=ngl)
        self.load_seconds = time.perf_counter() - t0
        self.model = self.engine.model
        self.params = self.engine.ctx.params
        self.kind = self.model.info.kind
        rng = random.Random(7)

        def text(n: int) -> list[int]:
            return self.model.tokenize(text_of(lambda s, _bos: self.model.tokenize(s), n, rng))

        # Long messages fill the sliding window's ring (or 200 tokens elsewhere) in about four.
        n_long = ring_cells(self.model.info.n_swa) // 4 + 32 if self.model.info.n_swa else 200
        self.short = [text(n) for n in (60, 40, 90, 30, 35, 45, 50)]
        self.long = [text(n_long) for _ in range(4)]
        self.stores = 0

    def placement(self) -> dict:
        from sessions.llama.placement import describe_devices

        return {"n_gpu_layers": self.params.n_gpu_layers, "devices": describe_devices(self.engine) or "CPU"}

    def msgs(self, *indices: int) -> Msgs:
        return [self.short[i] for i in indices]

    def long_branch(self) -> Msgs:
        return [self.short[0], *self.long]

    def store(self, folder: Path | None = None):
        from sessions.checkpoints import CheckpointStore

        if folder is None:
            self.stores += 1
            folder = self.root / f"store-{self.stores}"
        return CheckpointStore(folder, ram_bytes=RAM_BYTES, disk_bytes=DISK_BYTES)

    def branch_engine(self, store, interval: int = 2048, policy=None):
        from sessions.branching.branch_engine import BranchEngine
        from sessions.llama.context import LlamaContext

        return BranchEngine(self.model, LlamaContext(self.model, self.params), store, interval=interval,
                            policy=policy)

    def close(self) -> None:
        self.engine.close()


def continuation(engine, logits: np.ndarray) -> list[np.ndarray]:
    """The logits after the branch and after each of ``GREEDY`` greedy tokens; the context is
    put back as it was (cut for a plain cache, emptied for a window or recurrent state)."""
    out = [np.array(logits, copy=True)]
    pos = len(engine.live)
    for _ in range(GREEDY):
        logits = engine.ctx.decode([int(np.argmax(logits))], pos)
        out.append(np.array(logits, copy=True))
        pos += 1
    if engine.kind.value == "plain":
        engine.ctx.seq_rm(0, len(engine.live), -1)
    else:
        engine._reset()
    return out


def compare(got: list[np.ndarray], want: list[np.ndarray], position: int) -> dict:
    """Bit for bit; else the largest difference, at which step and vocabulary entry."""
    diffs = [np.abs(a.astype(np.float64) - b.astype(np.float64)) for a, b in zip(got, want, strict=True)]
    exact = all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    step = int(np.argmax([d.max() for d in diffs]))
    entry = int(np.argmax(diffs[step]))
    first = next((k for k, (a, b) in enumerate(zip(got, want, strict=True)) if not np.array_equal(a, b)), None)
    return {
        "bit_identical": exact,
        "max_abs_difference": float(diffs[step][entry]),
        "where": None if exact else {
            "step": "after the branch" if step == 0 else f"greedy token {step}",
            "position": position + step, "vocab_index": entry,
            "first_differing_step": first,
            "ours": float(got[step][entry]), "recompute": float(want[step][entry]),
        },
        "same_greedy_tokens": [int(np.argmax(a)) for a in got] == [int(np.argmax(b)) for b in want],
    }


def check(lab: Lab, engine, msgs: Msgs, stepped=None, interval: int = 2048) -> tuple[PrepareResult, dict]:
    """``engine`` prepares ``msgs`` by whatever route its state and store give; a fresh
    context without checkpoints evaluates the same branch from token 0."""
    tokens, ends = flat(msgs)
    result = engine.prepare(tokens, ends, stepped=stepped)
    got = continuation(engine, result.logits)
    fresh = lab.branch_engine(None, interval)
    try:
        want = continuation(fresh, fresh.prepare(tokens, ends, stepped=stepped).logits)
    finally:
        fresh.ctx.close()
    return result, {"tokens": len(tokens), **compare(got, want, len(tokens) - 1)}


def generate(engine, logits, n: int) -> list[int]:
    from sessions.llama.sampler import Sampler
    from sessions.sampling import SamplingSettings

    sampler = Sampler(SamplingSettings(temperature=0.0), engine.model.info.n_vocab)
    try:
        return engine.generate(logits, sampler, max_tokens=n).tokens
    finally:
        sampler.close()
