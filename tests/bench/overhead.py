"""Checkpointing cost on a normal turn, and generation speed against a bare decode loop."""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

TURNS = 3
REPLY_TOKENS = 64
QUESTION_TOKENS = 32
"""At most the tokens of ``turn_overhead``'s question in any vocabulary (ChatML's: about 20)."""
TOKENS_ADDED = 2 * TURNS * (QUESTION_TOKENS + REPLY_TOKENS)
"""What ``turn_overhead`` decodes after the branch it starts from: its turns, then as many
bare loops (the context is sized for it: ``workload.w1_context``)."""


def _turn(engine, tokens, ends, stepped, settings, n_gen):
    from sessions.llama.sampler import Sampler

    t0 = time.perf_counter()
    prep = engine.prepare(tokens, ends, stepped=stepped, reply_follows=True)
    sampler = Sampler(settings, engine.model.info.n_vocab)
    result = engine.generate(prep.logits, sampler, max_tokens=n_gen)
    sampler.close()
    return time.perf_counter() - t0, result, prep.decode_seconds


def turn_overhead(bench, turns: int = TURNS, n_gen: int = REPLY_TOKENS) -> dict:
    """Same turns on two contexts, with and without checkpoints, interleaved."""
    from sessions.branching.branch_engine import BranchEngine
    from sessions.checkpoints import CheckpointStore
    from sessions.controller.branch_tokens import branch_tokens
    from sessions.llama.context import ContextParams, LlamaContext
    from sessions.sampling import SamplingSettings

    model = bench.ctl.engine.model
    s = bench.settings
    params = ContextParams(n_ctx=s.n_ctx, n_batch=s.n_batch, n_threads=s.threads)
    greedy = SamplingSettings(temperature=0.0)
    with (
        tempfile.TemporaryDirectory() as tmp,
        CheckpointStore(Path(tmp), ram_bytes=8 << 30, disk_bytes=50 << 30) as store,
    ):
        with_ck = BranchEngine(model, LlamaContext(model, params), store, interval=s.checkpoint_interval)
        without = BranchEngine(model, LlamaContext(model, params), None, interval=s.checkpoint_interval)
        path = bench.ctl.snapshot().path
        tokens, ends, stepped = branch_tokens(bench.store, bench.ctl.engine, path)
        for engine in (with_ck, without):
            engine.prepare(tokens, ends, stepped=stepped)
        question = bench.ctl.engine.tokenize(
            "<|im_end|>\n<|im_start|>user\nAnd what happened after that?<|im_end|>\n<|im_start|>assistant\n", False
        )
        times = {"with": [], "without": []}
        gen_tps, lengths, outside = [], [], []
        for _ in range(turns):
            tokens, ends, stepped = tokens + question, ends + [len(tokens) + len(question)], stepped + [False]
            t_with, r_with, _ = _turn(with_ck, tokens, ends, stepped, greedy, n_gen)
            # The files of that turn are written before the next one, as while a user reads
            # a reply: the writer would otherwise take a core from the turn measured next.
            store.flush()
            d0 = without.ctx.decode_seconds
            t_without, r_without, prompt_decode = _turn(without, tokens, ends, stepped, greedy, n_gen)
            generate_decode = without.ctx.decode_seconds - d0 - prompt_decode
            assert r_with.tokens == r_without.tokens, "checkpointing changed the reply"
            times["with"].append(t_with)
            times["without"].append(t_without)
            gen_tps.append(len(r_without.tokens) / r_without.seconds)
            lengths.append(len(r_without.tokens))
            outside.append((r_without.seconds - generate_decode) / max(len(r_without.tokens), 1))
            tokens, ends, stepped = tokens + r_with.tokens, ends + [len(tokens) + len(r_with.tokens)], stepped + [True]
        store.flush()
        bare = _bare_loop_tps(without, question, max(1, int(statistics.median(lengths))), turns)
        for engine in (with_ck, without):
            engine.ctx.close()
    med_with, med_without = statistics.median(times["with"]), statistics.median(times["without"])
    tps = statistics.median(gen_tps)
    return {
        "turn_seconds_with_checkpoints": round(med_with, 4),
        "turn_seconds_without": round(med_without, 4),
        "checkpoint_overhead": round(med_with / med_without - 1, 4),
        "target_overhead": 0.05,
        "generation_tps": round(tps, 2),
        "bare_decode_loop_tps": round(bare, 2),
        "generation_vs_bare": round(tps / bare, 4),
        "target_generation_vs_bare": 0.95,
        "reply_tokens": int(statistics.median(lengths)),
        "generate_ms_outside_decode_per_token": round(statistics.median(outside) * 1e3, 4),
    }


def _bare_loop_tps(engine, question: list[int], n: int, loops: int) -> float:
    """The fastest possible greedy loop, as a reply meets it: the question decoded as one
    batch, then ``n`` tokens (the replies' median length), each decoded alone after an
    argmax.

    Timed from the first argmax, as ``generate`` times a reply from its first sample. A
    loop over tokens already warm would miss what the first single-token decode after a
    batch costs (on a GPU, a new compute graph), which every reply pays; with replies of a
    few tokens that decides the comparison. The median of ``loops`` loops, each going on
    from the last. The engine's own bookkeeping is left behind: this is the last use of
    its context.
    """
    pos = len(engine.live)
    rates = []
    for _ in range(loops):
        logits = engine.ctx.decode(question, pos)
        pos += len(question)
        t0 = time.perf_counter()
        for _ in range(n):
            token = int(np.argmax(logits))
            logits = engine.ctx.decode([token], pos)
            pos += 1
        rates.append(n / (time.perf_counter() - t0))
    return statistics.median(rates)
