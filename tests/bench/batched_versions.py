"""N versions of a reply in one batch against one version, and against N alone.

Run: ``python -m tests.bench.batched_versions [--arch gemma3 lfm2] [--tokens 200] [-n 4]``.
Prints one JSON line per model.

``Alt+R`` and ``ask --regenerate MSG -n N`` write versions one after another, each from
the question's state. llama.cpp can decode the N sequences in one batch (one token of each
per ``llama_decode``, the prompt shared with ``llama_memory_seq_cp``), which is what this
measures, straight on llama.cpp:

- ``batch_over_one``: N versions of ``--tokens`` tokens in one batch, over one version
  alone (the goal for N = 4 is at most 1.6 on a CPU); ``batch_over_one_in_decode``, the
  same inside ``llama_decode`` alone (sampling here is numpy's, N times per step);
- ``alone_over_one``: the same N one after another (what the app does now);
- ``settle_seconds``: each version decoded again as one batch from the question's state
  (restored with ``llama_state_seq_set_data``), as a rebuild decodes a reply that was not
  sampled one token at a time alone (``stepped`` false in ``sessions.controller.branch_tokens``);
  ``batch_and_settle_over_one``, the batch and that together over one version. Stored as
  such a reply, a batched version's cells are a rebuild's by construction;
- ``app_*``: the same through the app's engine (``LlamaChatEngine`` over a checkpoint
  store, llama.cpp's sampler chains): the N seeds each alone (``generate``, as Ctrl+R
  writes a reply, its checkpoints taken) against N versions in a batch
  (``generate_versions``: a context for the batch made, the question's state copied in,
  the versions sampled) and against those settled as the app settles them
  (``sessions.controller.versions.settle``: back to the question, the version decoded as
  a rebuild decodes it, its checkpoints taken). A reply that samples an end token stops
  there, so the quotients are of seconds per step: a batch's step against one token
  alone; ``app_batch_setup_seconds`` is the context for the batch and the state copied
  in, alone;
- how often a version sampled in the batch differs from the same seed sampled alone:
  ``logits_bit_identical_steps`` (steps whose logits equal the alone run's, bit for bit)
  and ``versions_with_other_tokens`` (versions whose sampled tokens differ at all, with the
  first place they do). A version the app stores must be rebuilt bit for bit by replaying
  its tokens one at a time, alone: where the batch's logits differ, its cells differ too.

The alone runs use a context made as the app makes its own (two sequences, one unified
cache); the batch one with N sequences, as llama-server's slots share one.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time

import numpy as np

PROMPT_TOKENS = 300
TEMPERATURE = 0.8


def sample(logits: np.ndarray, rng: np.random.Generator) -> int:
    """One token from ``softmax(logits / TEMPERATURE)``: the same logits and generator state
    give the same token, so a version's tokens depend on its logits alone."""
    z = logits.astype(np.float64) / TEMPERATURE
    p = np.exp(z - z.max())
    return int(np.searchsorted(np.cumsum(p), rng.random() * p.sum()))


class Llama:
    """The model and what a run needs of llama.cpp's C API."""

    def __init__(self, path: str, threads: int, gpu_layers: int = 0):
        from sessions.llama.native import lib

        L = lib()  # llama.cpp's log routed as the app routes it, for the life of the process
        self.L, self.threads = L, threads
        params = L.llama_model_default_params()
        params.n_gpu_layers = gpu_layers
        self.model = L.llama_model_load_from_file(path.encode(), params)
        if not self.model:
            raise SystemExit(f"cannot load {path}")
        self.n_vocab = L.llama_vocab_n_tokens(L.llama_model_get_vocab(self.model))
        self.batch = L.llama_batch_init(512, 0, 1)

    def context(self, n_seq_max: int):
        L = self.L
        params = L.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = 2048, 512, 512
        params.n_seq_max, params.kv_unified, params.swa_full = n_seq_max, True, False
        params.n_threads = params.n_threads_batch = self.threads
        params.no_perf = True
        ctx = L.llama_init_from_model(self.model, params)
        if not ctx:
            raise SystemExit("cannot make a context")
        return ctx

    def decode(self, ctx, items: list[tuple[int, int, int]], *, last_only: bool = False) -> list[np.ndarray]:
        """Decode (token, position, sequence) items as one batch; the logits of each (of the
        last alone with ``last_only``, as a prompt's prefill asks)."""
        b = self.batch
        b.n_tokens = len(items)
        for i, (token, pos, seq) in enumerate(items):
            b.token[i], b.pos[i], b.n_seq_id[i] = token, pos, 1
            b.logits[i] = int(not last_only or i == len(items) - 1)
            b.seq_id[i][0] = seq
        if self.L.llama_decode(ctx, b) != 0:
            raise SystemExit("llama_decode failed")
        wanted = [len(items) - 1] if last_only else range(len(items))
        return [np.ctypeslib.as_array(self.L.llama_get_logits_ith(ctx, i), shape=(self.n_vocab,)).copy()
                for i in wanted]

    def prompt(self, ctx, tokens: list[int]) -> np.ndarray:
        """The prompt on sequence 0, in one batch."""
        (logits,) = self.decode(ctx, [(token, pos, 0) for pos, token in enumerate(tokens)], last_only=True)
        return logits

    def close(self) -> None:
        self.L.llama_batch_free(self.batch)
        self.L.llama_model_free(self.model)


def alone(llama: Llama, prompt: list[int], seed: int, tokens: int):
    """One version in a fresh context of the app's shape: its tokens, logits, seconds, and
    seconds inside ``llama_decode`` (with the copy of its logits)."""
    ctx = llama.context(2)
    logits = llama.prompt(ctx, prompt)
    rng = np.random.default_rng(seed)
    out, seen, decoding = [], [], 0.0
    t0 = time.perf_counter()
    for step in range(tokens):
        token = sample(logits, rng)
        out.append(token)
        t1 = time.perf_counter()
        (logits,) = llama.decode(ctx, [(token, len(prompt) + step, 0)])
        decoding += time.perf_counter() - t1
        seen.append(logits)
    seconds = time.perf_counter() - t0
    llama.L.llama_free(ctx)
    return out, seen, seconds, decoding


def batched(llama: Llama, prompt: list[int], seeds: list[int], tokens: int):
    """Versions in one batch after one prompt: their tokens, logits, the seconds, and the
    seconds inside ``llama_decode``."""
    n = len(seeds)
    ctx = llama.context(n)
    first = llama.prompt(ctx, prompt)
    memory = llama.L.llama_get_memory(ctx)
    for seq in range(1, n):
        llama.L.llama_memory_seq_cp(memory, 0, seq, -1, -1)
    rngs = [np.random.default_rng(seed) for seed in seeds]
    logits = [first] * n
    out: list[list[int]] = [[] for _ in seeds]
    seen: list[list[np.ndarray]] = [[] for _ in seeds]
    decoding = 0.0
    t0 = time.perf_counter()
    for step in range(tokens):
        chosen = [sample(logits[k], rngs[k]) for k in range(n)]
        t1 = time.perf_counter()
        logits = llama.decode(ctx, [(chosen[k], len(prompt) + step, k) for k in range(n)])
        decoding += time.perf_counter() - t1
        for k in range(n):
            out[k].append(chosen[k])
            seen[k].append(logits[k])
    seconds = time.perf_counter() - t0
    llama.L.llama_free(ctx)
    return out, seen, seconds, decoding


def settled(llama: Llama, prompt: list[int], versions: list[list[int]]) -> float:
    """Seconds to decode each version again as one batch from the question's state, that
    state restored before each (what the app's restore does from a checkpoint in RAM)."""
    L = llama.L
    ctx = llama.context(2)
    llama.prompt(ctx, prompt)
    size = L.llama_state_seq_get_size(ctx, 0)
    question = (ctypes.c_uint8 * size)()
    if L.llama_state_seq_get_data(ctx, question, size, 0) != size:
        raise SystemExit("cannot read the question's state")
    t0 = time.perf_counter()
    for tokens in versions:
        if L.llama_state_seq_set_data(ctx, question, size, 0) != size:
            raise SystemExit("cannot restore the question's state")
        llama.decode(ctx, [(token, len(prompt) + i, 0) for i, token in enumerate(tokens)], last_only=True)
    seconds = time.perf_counter() - t0
    L.llama_free(ctx)
    return seconds


def through_the_app(path: str, n: int, tokens: int, threads: int, seed: int, gpu_layers: int) -> dict:
    """N replies alone, N versions in a batch, and those settled, as the app writes them."""
    import tempfile
    from pathlib import Path

    from sessions.checkpoints import CheckpointStore
    from sessions.controller.branch_tokens import BranchTokens
    from sessions.controller.versions import settle
    from sessions.engine.chat_engine import LlamaChatEngine
    from sessions.llama.batch_context import BatchContext
    from sessions.llama.context import ContextParams
    from sessions.llama.sequences import LIVE
    from sessions.llama.state_blob import FLAGS_FULL
    from sessions.sampling import SamplingSettings

    sampling = SamplingSettings(temperature=TEMPERATURE, top_k=0, top_p=1.0, min_p=0.0, seed=seed)
    settings = [sampling.with_(seed=seed + k) for k in range(n)]
    params = ContextParams(n_ctx=PROMPT_TOKENS + tokens + 64, n_threads=threads)
    with tempfile.TemporaryDirectory() as folder, \
            CheckpointStore(Path(folder), ram_bytes=1 << 30, disk_bytes=4 << 30) as store:
        engine = LlamaChatEngine(path, params, n_gpu_layers=gpu_layers, checkpoints=store)
        try:
            prompt = np.random.default_rng(seed).integers(1, engine.info.n_vocab, PROMPT_TOKENS).tolist()
            question = BranchTokens(prompt, [len(prompt)], [False])

            def asked():
                return engine.prepare(prompt, question.ends, question.stepped, reply_follows=True).logits

            engine.generate(asked(), sampling, max_tokens=min(tokens, 8))  # warm
            alone_seconds, alone_tokens = 0.0, 0
            for one in settings:  # each alone, as replies are written one at a time
                logits = asked()
                t0 = time.perf_counter()
                alone_tokens += len(engine.generate(logits, one, max_tokens=tokens).tokens)
                alone_seconds += time.perf_counter() - t0
            logits = asked()
            t0 = time.perf_counter()
            versions = engine.generate_versions(logits, settings, max_tokens=tokens)
            batch_seconds = time.perf_counter() - t0
            t0 = time.perf_counter()
            for version in versions:
                settle(engine, question, version.tokens, version.stop_reason)
            settle_seconds = time.perf_counter() - t0
            engine.prepare(prompt, question.ends, question.stepped)
            t0 = time.perf_counter()
            with BatchContext(engine.model, engine.ctx.params, n, len(prompt) + n * tokens + 1) as batch:
                batch.load(engine.ctx.state_read(LIVE, FLAGS_FULL))
            setup_seconds = time.perf_counter() - t0
        finally:
            engine.close()
    one_step = alone_seconds / max(1, alone_tokens)
    steps = max(len(v.tokens) for v in versions) or 1
    return {
        "app_alone_tokens": alone_tokens, "app_version_tokens": [len(v.tokens) for v in versions],
        "app_alone_seconds": round(alone_seconds, 4), "app_batch_seconds": round(batch_seconds, 4),
        "app_settle_seconds": round(settle_seconds, 4), "app_batch_setup_seconds": round(setup_seconds, 4),
        "app_batch_over_one": round(batch_seconds / steps / one_step, 2),
        "app_batch_and_settle_over_one": round((batch_seconds + settle_seconds) / steps / one_step, 2),
    }


def measure(label: str, path: str, n: int, tokens: int, threads: int, seed: int = 1, gpu_layers: int = 0,
            app: bool = True) -> dict:
    llama = Llama(path, threads, gpu_layers)
    try:
        prompt = np.random.default_rng(seed).integers(1, llama.n_vocab, PROMPT_TOKENS).tolist()
        seeds = [seed + k for k in range(n)]
        alone(llama, prompt, seed, min(tokens, 8))  # warm: the first decodes of a process are slower
        singles = [alone(llama, prompt, s, tokens) for s in seeds]
        versions, seen, batch_seconds, batch_decoding = batched(llama, prompt, seeds, tokens)
        settle_seconds = settled(llama, prompt, versions)
    finally:
        llama.close()
    one, one_decoding = singles[0][2], singles[0][3]
    identical_steps = sum(np.array_equal(a, b) for k in range(n) for a, b in zip(singles[k][1], seen[k], strict=True))
    differing = {}
    for k in range(n):
        mine = singles[k][0]
        if versions[k] != mine:
            differing[str(k)] = next(i for i, (a, b) in enumerate(zip(mine, versions[k], strict=True)) if a != b)
    return {
        "model": label, "event": "several versions", "versions": n, "tokens": tokens,
        "prompt_tokens": PROMPT_TOKENS, "threads": threads, "n_gpu_layers": gpu_layers,
        "one_seconds": round(one, 4), "batch_seconds": round(batch_seconds, 4),
        "alone_seconds": round(sum(s[2] for s in singles), 4),
        "batch_over_one": round(batch_seconds / one, 2),
        "batch_over_one_in_decode": round(batch_decoding / one_decoding, 2),
        "alone_over_one": round(sum(s[2] for s in singles) / one, 2),
        "settle_seconds": round(settle_seconds, 4),
        "batch_and_settle_over_one": round((batch_seconds + settle_seconds) / one, 2),
        "logits_bit_identical_steps": f"{identical_steps}/{n * tokens}",
        "versions_with_other_tokens": len(differing),
        "first_other_token_at": differing,
        **(through_the_app(path, n, tokens, threads, seed, gpu_layers) if app else {}),
    }


def main(argv: list[str] | None = None) -> int:
    from sessions.synth import SIZES
    from tests.bench.branching import models

    parser = argparse.ArgumentParser(prog="python -m tests.bench.batched_versions", description=__doc__.splitlines()[0])
    parser.add_argument("--arch", nargs="*", default=["gemma3", "lfm2"])
    parser.add_argument("--size", choices=SIZES, default="bench")
    parser.add_argument("-n", type=int, default=4, help="versions in the batch")
    parser.add_argument("--tokens", type=int, default=200, help="tokens of each version")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--ngl", default="0", help='layers offloaded to the GPUs here: a number, or "all"')
    args = parser.parse_args(argv)
    gpu_layers = -1 if args.ngl == "all" else int(args.ngl)
    # The models the branching benchmark makes (the same window per size): made once.
    for arch, path in models(argparse.Namespace(arch=args.arch, model=[], size=args.size)):
        print(json.dumps(measure(arch, str(path), args.n, args.tokens, args.threads, gpu_layers=gpu_layers)),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
