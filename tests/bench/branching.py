"""Benchmark W1: branch events, reopen, the engine's own costs, bytes and disk, as JSON lines.

Run: ``python -m tests.bench.branching [--arch gemma3 lfm2] [--shape NAME] [--model PATH]
[--each-event same|objects|process] [--w1-only] [--no-scratch] [--reply-tokens 32]``.
For each model (bench-size made models, about 100M parameters with gemma3's window at 512
tokens; a real model's KV and state shape on a thin body, ``--shape``; or any GGUF given
with ``--model``) it:

- times identifying the file and reading its header, and loading it (and once, reading
  the header of a 262,144-token vocabulary); the context is sized to the workload
  (``workload.w1_context``: W1's longest branch in this model's tokens, and what the
  reopen adds to it);
- builds a 12-turn chat (system ~200 tokens, user turns ~120, replies ~380) in one prefill
  and reports what that prefill cost outside llama_decode (the critical path), what was
  read out afterwards, the bytes copied out of the model's memory, and the same prefill
  with no checkpoints at all;
- edits user turns 2, 6 and 11, after each edit switches back to the original branch and
  asks for the next reply, and compares every event's prompt time with a from-scratch
  recompute (a fresh context evaluating the whole prompt, as a front end without
  checkpoints does);
- reports the disk the tree's checkpoints take against the KV of its unique tokens;
- reopens the session in fresh objects (new model load, empty RAM tier: everything from
  disk, page cache warm) and restores the last branch, five times over, and compares the
  median with reading and copying the same bytes plainly (right after the restore, and
  with the CPU caches emptied first, as a reopen finds them); times the same restore in
  five new processes (``new_process_*``), each paired with that cold read and memcpy
  measured right after it; then checks the restored logits bit for bit,
  regenerates the last reply and continues with a new message.
Figures go to stdout, one JSON object per line; ``budget_*`` fields give the goals. With
``--rpc HOST:PORT,...`` the models are split over those servers (``--ngl`` layers, half
each) and each event also says how many bytes its restore sent over RPC (``rpc_traffic``);
without it, ``--ngl N`` offloads N layers to this machine's GPUs (a CUDA or Metal build).
``--cache-type q8_0`` (or another of llama.cpp's types) keeps the K and V caches in it.
The checkpoints keep the app's RAM tier (``--ram-mb``, default ``checkpoints.ram_mb``) and
a disk tier larger than any tree here, so that what a tree takes is measured.

Bytes (exact on any machine; "KV" is a token's K and V in every layer that keeps cells of
its own, each token's window KV once, as the context serialises them: ``kv_bytes``):

- ``load``: ``n_ctx``, the context's size; ``ram_mb``, the checkpoints' RAM tier.
- ``build: ...``: ``critical_ms_per_1000_tokens`` (wall) and ``critical_cpu_ms_per_1000_tokens``
  (this thread's CPU), the prefill's time outside llama_decode on the path to the first
  token; ``deferred_ms_per_1000_tokens``, the read-out after it; ``bytes_read``, the state
  bytes copied out of the model's memory over the prefill and its read-out
  (``ctx.bytes_read``), of which ``bytes_read_deferred`` by the read-out;
  ``bytes_read_per_1000_tokens``; ``kv_bytes_of_tokens`` and ``bytes_read_vs_kv`` (goal
  ``budget_bytes_read_vs_kv``); ``path_reads_into_touched_memory`` and
  ``path_reads_into_new_memory``, the states read on that path (window pieces the prompt
  overwrites, recurrent states) into buffers touched ahead and into new memory.
- each W1 event: ``bytes_restored`` (what its route put back), ``bytes_restored_ram`` and
  ``bytes_restored_disk`` (the checkpoints its plan restored, by the tier each came from,
  the window or state a cut rewinds to included; a window made of pieces counts as disk
  when one of them is), ``bytes_written`` (state bytes written into the context,
  ``ctx.bytes_written``), ``bytes_read`` (copied out: the checkpoints of the
  ``tokens_decoded``, prompt and reply) and ``bytes_read_vs_kv_of_decoded``. ``W1 summary``
  sums them over the six events.
- ``disk``: ``disk_bytes`` (cells plus snapshots: windows' pieces, recurrent states, logits)
  and ``disk_bytes_per_1000_unique_tokens``; ``kv_bytes_per_token`` (measured on the
  context), split into ``kv_window_bytes_per_token`` and ``kv_cells_bytes_per_token``, and for
  a made model ``kv_bytes_per_token_from_shape`` (``sessions.synth.memory_bytes``) and the
  difference, ``kv_cell_metadata_bytes_per_token`` (a cell's position and sequence ids);
  ``kv_bytes_per_1000_unique_tokens``; ``disk_vs_kv_of_unique_tokens`` (goal
  ``budget_disk_vs_kv_of_unique_tokens``); ``snapshots_vs_window_kv_of_unique_tokens``;
  ``unique_tokens_in_default_disk_budget``, the unique tokens ``checkpoints.max_disk``'s
  default (``default_disk_budget_bytes``) holds at this model's disk per token;
  ``longest_branch_tokens``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from tests.bench import costs, workload
from tests.bench.overhead import turn_overhead
from tests.bench.w1_bench import Bench, emit, w1_event_child
from tests.bench.workload import REOPEN_MESSAGE

__all__ = ["Bench", "emit", "main", "models"]


def files_read(bench: Bench, leaf_id: int) -> list[Path]:
    """The checkpoint files a restore of the branch up to ``leaf_id`` reads, per the branch
    engine's plan for it."""
    from sessions.branching.captures import prefix_hashes
    from sessions.branching.segments import segment_boundaries
    from sessions.checkpoints.keys import address
    from sessions.controller.branch_tokens import branch_tokens

    engine = bench.branches
    tokens, ends, stepped = branch_tokens(bench.store, bench.ctl.engine, bench.ctl.snapshot().tree.path_to(leaf_id))
    plan = engine.plan(tokens, ends, need_logits=False, stepped=stepped)
    prefixes = prefix_hashes(tokens, segment_boundaries(ends, engine.interval))
    folder = bench.root / "checkpoints"
    paths = [folder / address(engine.compat, prefixes[info.end], "cells") for info in plan.restore]
    if plan.snapshot is not None:
        paths.append(folder / address(engine.compat, prefixes[plan.snapshot.end], "snapshot"))
    return paths


def exact_after_reopen(bench: Bench, leaf_id: int) -> dict:
    """Logits of the branch restored from disk against a fresh context's, bit for bit."""
    import numpy as np

    from sessions.branching.branch_engine import BranchEngine
    from sessions.controller.branch_tokens import branch_tokens
    from sessions.llama.context import LlamaContext

    engine = bench.ctl.engine
    params = engine.ctx.params
    tokens, ends, stepped = branch_tokens(bench.store, engine, bench.ctl.snapshot().tree.path_to(leaf_id))
    restored_ctx, fresh_ctx = LlamaContext(engine.model, params), LlamaContext(engine.model, params)
    try:
        restored = BranchEngine(engine.model, restored_ctx, bench.checkpoints).prepare(tokens, ends, stepped=stepped)
        fresh = BranchEngine(engine.model, fresh_ctx, None).prepare(tokens, ends, stepped=stepped)
    finally:
        restored_ctx.close()
        fresh_ctx.close()
    return {"tokens": len(tokens), "tokens_restored": restored.tokens_restored,
            "tokens_evaluated": restored.tokens_evaluated,
            "bit_identical_logits": bool(np.array_equal(restored.logits, fresh.logits)),
            "max_abs_difference": float(np.max(np.abs(restored.logits - fresh.logits)))}


REOPENS = 5
"""Reopens timed, each in fresh objects after a new load: one alone swings by a third with
the machine's minutes (10-17 ms for the same restore here), so the median is reported."""


def restore_last_branch(bench: Bench, w1: dict) -> tuple[object, list[Path]]:
    """Open the W1 session in ``bench`` and restore its last branch; the result and files read."""
    ctl = bench.ctl
    ctl.open_session(w1["session"])
    files = files_read(bench, w1["leaf"])
    return ctl.warm(w1["leaf"]), files


def new_process_restores(root: Path, w1: dict, model: Path, threads: int, whole_state: int, files: list[Path],
                         ngl: int | str, cache_type: str = "f16", reopens: int = REOPENS) -> dict:
    """The same restore in ``reopens`` new processes, as a user's reopen runs: Python's
    code, numpy and the restore buffers all start cold there (``reopen_ab``).

    Each restore is paired with a plain read and memcpy of the same files, with the CPU
    caches emptied first (as the new process finds them), measured right after it: the
    machine's speed swings by a third from one minute to the next, and a pair meets the
    same minute, so the ratio of each pair holds where the seconds alone do not."""
    from tests.bench.reopen_ab import REPO, keep_w1, restores_in_new_processes

    keep_w1(root, w1, model, ngl, cache_type)
    references: list[float] = []
    runs = restores_in_new_processes(root, threads, reopens, [REPO],
                                     after_each=lambda: references.append(costs.cold_memcpy_reference(files)))[0]
    seconds = sorted(runs)
    median = seconds[len(seconds) // 2]
    ratios = sorted(run / max(reference, 1e-9) for run, reference in zip(runs, references, strict=True))
    return {"new_process_restore_seconds": round(median, 5),
            "new_process_restore_seconds_range": [round(seconds[0], 5), round(seconds[-1], 5)],
            "new_process_restore_gb_per_second": round(whole_state / median / 1e9, 3),
            "new_process_read_plus_memcpy_cold_seconds": round(sorted(references)[len(references) // 2], 5),
            "new_process_vs_read_plus_memcpy_cold": round(ratios[len(ratios) // 2], 2),
            "new_process_vs_read_plus_memcpy_cold_range": [round(ratios[0], 2), round(ratios[-1], 2)],
            "budget_new_process_vs_read_plus_memcpy_cold": costs.BUDGET_RESTORE_VS_MEMCPY}


def reopen(label: str, path: Path, threads: int, reply_tokens: int, root: Path, w1: dict, rpc=None, ngl=0,
           cache_type: str = "f16", reopens: int = REOPENS) -> None:
    """Fresh objects on the same files: the model is loaded again, RAM holds nothing.

    The restore is timed in fresh objects in this process and in new processes
    (without ``rpc``: a new process would need the servers' addresses too)."""
    timed = []
    for _ in range(reopens - 1):
        bench = Bench(label, path, threads, reply_tokens, root, rpc, ngl, cache_type)
        timed.append(restore_last_branch(bench, w1)[0])
        bench.close()
    bench = Bench(label, path, threads, reply_tokens, root, rpc, ngl, cache_type)
    ctl = bench.ctl
    last, files = restore_last_branch(bench, w1)
    timed = sorted([*timed, last], key=lambda result: result.seconds)
    leaf = ctl.snapshot().tree.get(w1["leaf"])
    whole = bench.branches.ctx.state_size(0)
    emit({"model": label, "event": "reopen: restore the last branch from disk",
          **costs.restore_speed(timed[len(timed) // 2], whole, files), "reopens": reopens,
          "restore_seconds_range": [round(timed[0].seconds, 5), round(timed[-1].seconds, 5)],
          **(new_process_restores(root, w1, path, threads, whole, files, ngl, cache_type, reopens)
             if rpc is None else {}),
          **bench.traffic_fields()})
    t0 = time.perf_counter()
    ctl.regenerate(leaf.id)
    reply = ctl.generate_reply(max_tokens=8)
    wall = time.perf_counter() - t0
    scratch = bench.scratch(leaf.parent_id).seconds
    emit({"model": label, "event": "reopen: regenerate last reply",
          "ttft_seconds": round(reply.stats.ttft_seconds, 4), "wall_seconds": round(wall, 4),
          "tokens_restored": reply.stats.tokens_restored, "tokens_evaluated": reply.stats.tokens_evaluated,
          "scratch_prompt_seconds": round(scratch, 4),
          "ttft_speedup": round(scratch / max(reply.stats.ttft_seconds, 1e-6), 1), **bench.traffic_fields()})
    emit({"model": label, "event": "reopen: exactness", **exact_after_reopen(bench, leaf.parent_id)})
    bench.mark()
    asked = ctl.send(REOPEN_MESSAGE)
    bench.event("reopen: continue with a new message", asked, ctl.generate_reply())
    emit({"model": label, "event": "turn overhead", **turn_overhead(bench)})
    bench.close()


def models(args) -> list[tuple[str, Path]]:
    from sessions.synth import SHAPES, make_model

    window = {"tiny": 64, "bench": 512, "gpu": 1024}[args.size]
    found = [(arch, make_model(arch, args.size, swa_window=window)) for arch in args.arch]
    found += [(name, make_model(SHAPES[name].arch, name)) for name in getattr(args, "shape", [])]
    return found + [(Path(p).name, Path(p).expanduser().resolve()) for p in args.model]


def made_specs(args) -> dict:
    """The ``ModelSpec`` of each made model ``models`` names, by its label."""
    from sessions.synth import SHAPES, model_spec

    window = {"tiny": 64, "bench": 512, "gpu": 1024}[args.size]
    specs = {arch: model_spec(arch, args.size, swa_window=window) for arch in args.arch}
    return {**specs, **{name: model_spec(SHAPES[name].arch, name) for name in args.shape}}


EACH_EVENT = ("same", "objects", "process")


def main(argv: list[str] | None = None) -> int:
    from sessions.cli.arguments import gpu_layers
    from sessions.llama.cache_types import CACHE_TYPES
    from sessions.synth import SHAPES, SIZES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", nargs="*", default=None, help="made bench models (default: gemma3 lfm2)")
    parser.add_argument("--shape", action="append", default=[], choices=tuple(SHAPES), metavar="NAME",
                        help="a real model's memory shape on a thin body (repeatable; "
                             "python -m sessions.synth --shapes lists them)")
    parser.add_argument("--model", action="append", default=[], metavar="PATH", help="a GGUF file (repeatable)")
    parser.add_argument("--size", choices=SIZES, default="bench",
                        help="made models' size (tiny: a quick check that the benchmark runs; gpu: ~2B, "
                             "window 1,024)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--reply-tokens", type=int, default=32)
    parser.add_argument("--rpc", metavar="HOST:PORT,...", help="split the models over these RPC servers")
    parser.add_argument("--ngl", type=gpu_layers, default=None,
                        help="layers offloaded: to this machine's GPUs (default 0), or with --rpc to the "
                             "servers (default 12 of the made models' 18)")
    parser.add_argument("--cache-type", choices=CACHE_TYPES, default="f16", help="K and V cache type (-ctk, -ctv)")
    parser.add_argument("--each-event", choices=EACH_EVENT, default="same",
                        help="run each W1 event in this process (same), in fresh objects (objects: the model "
                             "loaded again, nothing in RAM) or in a new process (process)")
    parser.add_argument("--reopens", type=int, default=REOPENS, help="restores timed after a reopen (median)")
    parser.add_argument("--w1-only", action="store_true",
                        help="only W1's events (the reopen events after it are the same in either --each-event)")
    parser.add_argument("--no-scratch", action="store_true",
                        help="leave out the from-scratch prefills (each as long as the chat: hours on a real "
                             "model's shape on a CPU); bytes and evaluated tokens are measured all the same")
    parser.add_argument("--ram-mb", type=int, default=None,
                        help="the checkpoints' RAM tier in MiB (default: the app's, checkpoints.ram_mb)")
    workload.add_scale_flag(parser)
    parser.add_argument("--w1-event", type=int, help=argparse.SUPPRESS)  # a child of --each-event process
    parser.add_argument("--w1-state", help=argparse.SUPPRESS)
    parser.add_argument("--label", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    workload.set_scale(args.w1_scale)
    if args.w1_event is not None:
        return w1_event_child(args)
    if args.ngl is None:
        args.ngl = 12 if args.rpc else 0
    from tests.bench.rpc_traffic import RpcTraffic

    rpc = RpcTraffic(args.rpc.split(",")) if args.rpc else None
    if args.arch is None:
        args.arch = [] if args.model or args.shape else ["gemma3", "lfm2"]
    from sessions import paths

    # Made models are kept where the user's other runs find them; the rest is per run.
    os.environ.setdefault("LLAMACHAT_MODEL_CACHE", str(paths.made_models_dir()))
    emit({"event": "header of a 262,144-token vocabulary", **costs.big_vocabulary_headers()})
    specs = made_specs(args)
    for label, path in models(args):
        emit({"model": label, "event": "identity", **costs.identity(path)})
        with tempfile.TemporaryDirectory(prefix="llamachat-bench-") as tmp:
            root = Path(tmp)
            os.environ["LLAMACHAT_CACHE_DIR"] = str(root / "cache")
            bench = Bench(label, path, args.threads, args.reply_tokens, root, rpc, args.ngl, args.cache_type,
                          spec=specs.get(label), ram_mb=args.ram_mb)
            bench.from_scratch = not args.no_scratch
            emit({"model": label, "event": "load", "seconds": round(bench.load_seconds, 3),
                  "kind": bench.ctl.engine.info.kind.value, "n_params": bench.ctl.engine.info.n_params,
                  "cache_type": args.cache_type, "n_ctx": bench.ctl.engine.n_ctx, "ram_mb": bench.ram_mb,
                  "w1_scale": workload.SCALE,
                  **bench.placement_fields()})
            w1 = bench.run_w1(args.each_event, args)
            bench.close()
            if not args.w1_only:
                reopen(label, path, args.threads, args.reply_tokens, root, w1, rpc, args.ngl, args.cache_type,
                       args.reopens)
    return 0


if __name__ == "__main__":
    sys.exit(main())
