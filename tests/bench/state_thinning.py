"""Recurrent states under a disk budget of a quarter of what they want, as one JSON line.

Run: ``python -m tests.bench.state_thinning [--shape qwen3.5-9b] [--size tiny]``.

A chat of twelve messages, short and long, is prefilled once with room for every state
(the states it keeps and their size, this machine's spacing), then again into a folder
whose budget is the attention cells plus a quarter of those states: the disk tier thins
them evenly. Then, as after a reopen (a new context, every checkpoint on disk), four
edits, each alone: how many tokens each re-decodes before its own, against the bound of
four spacings, the ninth checked bit for bit against a from-scratch prefill.

``tests/engine/test_state_thinning.py`` runs it on the tiny qwen35 and holds it to the
bound; a real model's state shape (``--shape``, ``python -m sessions.synth --shapes``) gives
the figures at that size.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from sessions.branching.snapshot_policy import SnapshotPolicy
from sessions.checkpoints import CheckpointStore
from sessions.checkpoints.listing import list_files
from sessions.config import CheckpointConfig
from sessions.llama.context import ContextParams
from sessions.synth import SHAPES, make_model

PARAMS = ContextParams(n_ctx=8192, n_batch=64, n_threads=2)
TEXT = "the sea and the boats and the stars above the water, and a lighthouse by the shore "
SIZES = [2, 9, 3, 40, 5, 12, 30, 4, 6, 40, 5, 30]
"""Message lengths in sentences: short turns and long ones (several spacings of states)."""
POLICY = SnapshotPolicy()
"""The app's own: a state at every message end, and inside a message at this model's spacing."""
RAM_BYTES = CheckpointConfig().ram_mb << 20
"""The RAM tier the app has by default: what a prefill's states wait in for the disk."""
EDITS = (3, 8, 9, 10)
"""The messages edited after the reopen; the edit of 9 is checked against a recompute."""
CHECKED = 9


def messages(model: Any) -> list[list[int]]:
    return [model.tokenize(TEXT * n, add_bos=(i == 0))[: 16 * n] for i, n in enumerate(SIZES)]


def thinning(model_path: Path, folder: Path, params: ContextParams = PARAMS,
             ram_bytes: int = RAM_BYTES) -> dict[str, Any]:
    """The figures of one run (see the module's docstring), its files in ``folder``."""
    from sessions.llama.model import LlamaModel
    from tests.engine.test_exactness import check, engine_for, flat

    model = LlamaModel(model_path)
    try:
        msgs = messages(model)
        tokens, ends = flat(msgs)
        out: dict[str, Any] = {"ram_bytes": ram_bytes, "tokens": len(tokens), "message_ends": list(ends)}
        whole = folder / "whole"
        with CheckpointStore(whole, ram_bytes=ram_bytes, disk_bytes=1 << 40) as store:
            engine = engine_for(model, store, policy=POLICY, params=params)
            began = time.perf_counter()
            engine.prepare(tokens, ends)
            out["prefill_seconds"] = round(time.perf_counter() - began, 2)
            spacing = engine.captures.spacing
            if not store.flush(600):
                raise RuntimeError("the checkpoints were not all written within 600 s")
            out["dropped_writes"] = store.stats().dropped_writes
            engine.ctx.close()
        files = list_files(whole, headers=False)
        cells = sum(f.size for f in files if f.key[2] == "cells")
        states = [f for f in files if f.key[2] == "snapshot"]
        budget = cells + sum(f.size for f in states) // 4
        out.update(spacing=spacing, states=len(states), state_bytes=max((f.size for f in states), default=0),
                   cells_bytes=cells, budget_bytes=budget)
        tight = folder / "tight"
        with CheckpointStore(tight, ram_bytes=ram_bytes, disk_bytes=budget) as store:
            engine = engine_for(model, store, policy=POLICY, params=params)
            engine.prepare(tokens, ends)
            if not store.flush(600):
                raise RuntimeError("the checkpoints were not all written within 600 s")
            engine.ctx.close()
        out["states_kept"] = sum(1 for f in list_files(tight, headers=False) if f.key[2] == "snapshot")
        question = model.tokenize(" a new question about birds", add_bos=False)
        edits = []
        # A reopen: all from disk. Each edit writes checkpoints of its own; the budget has
        # room for them, so that they do not push out (as they would at the tight budget,
        # when the writer gets to it) the states the edits after them are to start from.
        with CheckpointStore(tight, ram_bytes=ram_bytes, disk_bytes=2 * budget) as store:
            engine = engine_for(model, store, policy=POLICY, params=params)
            for k in EDITS:  # each alone in a new context
                engine._reset()
                edited = msgs[:k] + [question]
                result = check(engine, model, edited) if k == CHECKED else engine.prepare(*flat(edited))
                edits.append({"edit": k, "redecoded": result.tokens_evaluated - len(question),
                              "exact": True if k == CHECKED else None})
            engine.ctx.close()
        out["edits"] = edits
        out["bound"] = 4 * spacing
        out["within_bound"] = all(e["redecoded"] <= 4 * spacing for e in edits)
        return out
    finally:
        model.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.state_thinning", description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="qwen35", help="a hybrid or recurrent architecture (default qwen35)")
    parser.add_argument("--size", default="tiny", help="tiny, bench, or a real model's shape of the architecture")
    parser.add_argument("--shape", choices=tuple(SHAPES), default=None,
                        help="a real model's state shape on a thin body (sets --arch and --size)")
    parser.add_argument("--ram-mb", type=int, default=RAM_BYTES >> 20,
                        help="the RAM tier in MiB (default: the app's, checkpoints.ram_mb)")
    args = parser.parse_args(argv)
    if args.shape:
        args.arch, args.size = SHAPES[args.shape].arch, args.shape
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="llamachat-thinning-") as folder:
        record = {"arch": args.arch, "size": args.size, **thinning(make_model(args.arch, args.size), Path(folder),
                                                                 ram_bytes=args.ram_mb << 20)}
    record["seconds"] = round(time.perf_counter() - began, 1)
    print(json.dumps(record), flush=True)
    return 0 if record["within_bound"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
