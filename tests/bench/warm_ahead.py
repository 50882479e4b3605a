"""A switch to a branch whose checkpoints are on disk, cold against warmed ahead, as JSON lines.

Run: ``python -m tests.bench.warm_ahead [--arch gemma3 lfm2] [--size bench] [--repeat 3]``.
For each model (bench-size made models by default, gemma3's window at 512 tokens) it
builds a chat of ``--turns`` turns in one prefill and a fork at its second question, and
keeps their checkpoints on disk. Then, ``--repeat`` times and alternately, it reopens the
store in new objects (an empty RAM tier: everything on disk), makes the fork live in a
new context, and switches to the long branch:

- cold: at once (the restore reads the files and checks them);
- warm: after ``warm_ahead`` read that branch's route into RAM (the restore copies it).

Each record gives the switch's seconds, its bytes, the tiers its plan restored from and
the tokens it evaluated; the warm one also gives what the warm read and took. Before
each switch the checkpoint files are dropped from the page cache (``posix_fadvise``
DONTNEED, these files only), as for a chat reopened once the system has forgotten them;
``--page-cache`` keeps them there instead, as for a chat used a moment ago (a cold
switch is then a copy through the page cache and a checksum).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.bench.workload import text_of


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def tiers(plan) -> list[str]:
    return sorted({part.tier for part in (*plan.restore, *(s for s in (plan.rewind, plan.snapshot) if s))})


def chat(model, turns: int, seed: int = 1) -> tuple[list[list[int]], list[list[int]]]:
    """The long branch's messages and the fork's (the second question edited), as tokens."""
    rng = random.Random(seed)

    def tokens(n: int, first: bool = False) -> list[int]:
        return model.tokenize(text_of(lambda t, b: model.tokenize(t, add_bos=b), n, rng), add_bos=first)

    long = [tokens(200, first=True)]
    for _ in range(turns):
        long += [tokens(120), tokens(380)]
    return long, long[:3] + [tokens(120)]


def forget(folder: Path) -> None:
    """Drop the checkpoint files from the page cache (they are written: nothing is lost)."""
    for path in folder.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def flat(messages: list[list[int]]) -> tuple[list[int], list[int]]:
    from sessions.branching.segments import message_ends

    return [t for m in messages for t in m], message_ends([len(m) for m in messages])


def run(arch: str, size: str, turns: int, repeat: int, threads: int, root: Path, page_cache: bool) -> None:
    from sessions.branching.branch_engine import BranchEngine
    from sessions.checkpoints import CheckpointStore
    from sessions.llama.context import ContextParams, LlamaContext
    from sessions.llama.model import LlamaModel
    from sessions.synth import make_model

    model = LlamaModel(make_model(arch, size, swa_window=512))
    params = ContextParams(n_ctx=8192, n_batch=512, n_threads=threads)
    long, fork = chat(model, turns)
    folder = root / arch

    def store() -> CheckpointStore:
        return CheckpointStore(folder, ram_bytes=4 << 30, disk_bytes=50 << 30)

    with store() as first:
        engine = BranchEngine(model, LlamaContext(model, params), first)
        t0 = time.perf_counter()
        engine.prepare(*flat(long))
        built = time.perf_counter() - t0
        engine.prepare(*flat(fork))
        first.flush()
        engine.ctx.close()
    emit({"arch": arch, "event": "built", "tokens": len(flat(long)[0]), "fork_tokens": len(flat(fork)[0]),
          "prefill_seconds": round(built, 2)})

    figures: dict[str, list[float]] = {"cold": [], "warm": []}
    for round_ in range(repeat):
        for kind in ("cold", "warm"):
            with store() as checkpoints:
                engine = BranchEngine(model, LlamaContext(model, params), checkpoints)
                engine.prepare(*flat(fork), need_logits=False)  # the branch shown
                record = {"arch": arch, "event": kind, "round": round_, "page_cache": page_cache}
                if not page_cache:
                    forget(folder)
                if kind == "warm":
                    t0 = time.perf_counter()
                    warmed = engine.warm_ahead(*flat(long), lambda: False)
                    record.update(warm_seconds=round(time.perf_counter() - t0, 4), warm_bytes=warmed.nbytes,
                                  warm_segments=warmed.segments, warm_left=warmed.left)
                plan = engine.plan(*flat(long), need_logits=False)
                result = engine.prepare(*flat(long), need_logits=False)
                record.update(switch_seconds=round(result.seconds, 4), bytes_restored=result.bytes_restored,
                              planned_tiers=tiers(plan), tokens_evaluated=result.tokens_evaluated)
                figures[kind].append(result.seconds)
                emit(record)
                engine.ctx.close()
    cold, warm = statistics.median(figures["cold"]), statistics.median(figures["warm"])
    emit({"arch": arch, "event": "summary", "page_cache": page_cache, "cold_median_ms": round(cold * 1e3, 2),
          "warm_median_ms": round(warm * 1e3, 2), "cold_over_warm": round(cold / warm, 2)})
    model.close()


def main(argv: list[str] | None = None) -> int:
    from sessions.synth import SIZES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", nargs="+", default=["gemma3", "lfm2"], choices=["llama", "gemma3", "lfm2", "mamba"])
    parser.add_argument("--size", choices=SIZES, default="bench")
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--page-cache", action="store_true", help="leave the files in the page cache")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="warm-ahead-") as root:
        for arch in args.arch:
            run(arch, args.size, args.turns, args.repeat, args.threads, Path(root), args.page_cache)
    return 0


if __name__ == "__main__":
    sys.exit(main())
