"""Benchmark W1: branch events, reopen, the engine's own costs and disk use, as JSON lines.

Run: ``python -m tests.bench.branching [--arch gemma3 lfm2] [--model PATH] [--reply-tokens 32]``.
For each model (bench-size made models, about 100M parameters with gemma3's window at 512
tokens, or any GGUF given with ``--model``) it:

- times identifying the file and reading its header, and loading it (and once, reading
  the header of a 262,144-token vocabulary);
- builds a 12-turn chat (system ~200 tokens, user turns ~120, replies ~380) in one prefill
  and reports what that prefill cost outside llama_decode (the critical path), what was
  read out afterwards, and the same prefill with no checkpoints at all;
- edits user turns 2, 6 and 11, after each edit switches back to the original branch and
  asks for the next reply, and compares every event's prompt time with a from-scratch
  recompute (a fresh context evaluating the whole prompt, as a front end without
  checkpoints does);
- reports the disk the tree's checkpoints take against the attention cells of its unique
  tokens;
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
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from tests.bench import costs
from tests.bench.overhead import turn_overhead
from tests.bench.workload import w1_texts


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


class Bench:
    def __init__(self, label: str, path: Path, threads: int, reply_tokens: int, root: Path, rpc=None, ngl=0,
                 cache_type: str = "f16"):
        from sessions.api.chat import EngineSettings, SessionController
        from sessions.checkpoints import CheckpointStore
        from sessions.engine.factory import llama_engine_factory
        from sessions.sampling import SamplingSettings
        from sessions.store import SessionStore

        self.label, self.path, self.root = label, path, root
        self.threads, self.ngl, self.cache_type = threads, ngl, cache_type
        split = dict(rpc=rpc.endpoints, tensor_split=(1.0, 1.0)) if rpc else {}
        self.settings = EngineSettings(n_ctx=8192, n_batch=512, threads=threads, n_gpu_layers=ngl,
                                       cache_type_k=cache_type, cache_type_v=cache_type, **split)
        self.traffic = rpc
        self.events: list[tuple[int, int, dict]] = []
        """(the message its prompt ends with, the reply, the record) of each event timed, in order."""
        self.built, self.build_seconds = 0, 0.0
        """The leaf of W1's chat and the seconds of its one prefill (``run_w1``)."""
        self.sampling = SamplingSettings(temperature=0.0, max_tokens=reply_tokens)
        self.reply_tokens = reply_tokens
        self.checkpoints = CheckpointStore(root / "checkpoints", ram_bytes=8 << 30, disk_bytes=50 << 30)
        self.store = SessionStore.open(root / "sessions.sqlite3")
        self.ctl = SessionController(
            self.store,
            engine_factory=llama_engine_factory(self.checkpoints, isolate_rpc=False),
            settings=self.settings,
            sampling=self.sampling,
        )
        t0 = time.perf_counter()
        self.ctl.load_model(self.path)
        self.load_seconds = time.perf_counter() - t0
        self.fingerprint = self.ctl.engine.info.fingerprint
        self.prepared: list = []
        """Every ``prepare`` result of the engine, for what the reply stats leave out (bytes)."""
        prepare = self.branches.prepare
        self.branches.prepare = lambda *a, **k: self.prepared.append(prepare(*a, **k)) or self.prepared[-1]
        self._scratch = None
        self.from_scratch = True
        """Time each event's prompt from zero too; off where only the chat it leaves is wanted
        (``reopen_ab``'s build)."""
        if rpc:
            rpc.attach(self)

    def traffic_fields(self) -> dict:
        return self.traffic.fields() if self.traffic else {}

    @property
    def branches(self):
        return self.ctl.engine.branches

    def scratch(self, leaf_id: int):
        """A fresh context with no checkpoints evaluating the branch up to ``leaf_id`` from zero."""
        from sessions.branching.branch_engine import BranchEngine
        from sessions.controller.branch_tokens import branch_tokens
        from sessions.llama.context import LlamaContext

        engine = self.ctl.engine
        if self._scratch is None:
            self._scratch = BranchEngine(engine.model, LlamaContext(engine.model, engine.ctx.params), None)
        tokens, ends, stepped = branch_tokens(self.store, engine, self.ctl.snapshot().tree.path_to(leaf_id))
        self._scratch._reset()
        return self._scratch.prepare(tokens, ends, stepped=stepped)

    def tokens_of(self, message_id: int) -> int:
        return len(self.store.get_tokens(message_id, self.fingerprint) or [])

    def event(self, name: str, new_message, reply) -> dict:
        stats = reply.stats
        whole = self.branches.ctx.state_size(0)  # the state the prompt left, before the reply's tokens
        prepared = self.prepared[-1] if self.prepared else None
        record = {
            "model": self.label,
            "event": name,
            "new_tokens": self.tokens_of(new_message.id),
            "tokens_restored": stats.tokens_restored,
            "tokens_evaluated": stats.tokens_evaluated,
            "bytes_restored": prepared.bytes_restored if prepared else 0,
            "whole_state_bytes": whole,
            "prompt_seconds": round(stats.prompt_seconds, 4),
            "ttft_seconds": round(stats.ttft_seconds, 4),
            "prompt_decode_seconds": round(prepared.decode_seconds, 4) if prepared else 0.0,
            "prompt_state_seconds": round(prepared.state_seconds, 4) if prepared else 0.0,
            **self.traffic_fields(),
        }
        if self.from_scratch:
            scratch_run = self.scratch(new_message.id)
            record.update({"scratch_prompt_seconds": round(scratch_run.seconds, 4),
                           "scratch_decode_seconds": round(scratch_run.decode_seconds, 4),
                           "speedup": round(scratch_run.seconds / max(stats.prompt_seconds, 1e-6), 1)})
        emit(record)
        self.events.append((new_message.id, reply.id, record))
        return record

    def run_w1(self, each_event: str = "same", args: argparse.Namespace | None = None) -> dict:
        """W1's chat in one prefill, then its six branch events: here (``same``), or each
        in fresh objects (``objects``: a new model load, nothing in RAM) or in a new
        process (``process``), as a user who restarts the app between gestures meets them."""
        w1 = self.build_w1()
        events = []
        for step in range(len(W1_EVENTS)):
            if each_event == "same":
                events.append(self.w1_event(step, w1))
            elif each_event == "objects":
                bench = Bench(self.label, self.path, self.threads, self.reply_tokens, self.root, None, self.ngl,
                              self.cache_type)
                events.append(bench.w1_event(step, w1))
                bench.close()
            else:
                assert args is not None
                events.append(event_in_new_process(args, self.label, self.path, self.root, step, w1))
        evaluated = sum(e["tokens_evaluated"] for e in events)
        new = sum(e["new_tokens"] for e in events)
        ours = sum(e["prompt_seconds"] for e in events)
        decode = sum(e["prompt_decode_seconds"] for e in events)
        summary = {"model": self.label, "event": "W1 summary", "each_event": each_event,
                   "tokens_evaluated": evaluated, "new_tokens": new, "evaluated_over_new": round(evaluated / new, 3),
                   "prompt_seconds": round(ours, 3), "prompt_outside_decode_seconds": round(ours - decode, 3),
                   "prompt_state_seconds": round(sum(e.get("prompt_state_seconds", 0.0) for e in events), 3)}
        if all("scratch_prompt_seconds" in e for e in events):
            scratch = sum(e["scratch_prompt_seconds"] for e in events)
            summary.update({"scratch_prompt_seconds": round(scratch, 3), "prompt_speedup": round(scratch / ours, 1)})
        emit(summary)
        self.checkpoints.flush()
        if each_event != "same":
            self.ctl.open_session(w1["session"])  # the events' branches, as the store holds them now
        emit({"model": self.label, "event": "disk", **self.disk()})
        return {"session": w1["session"], "leaf": w1["leaf"]}

    def w1_event(self, step: int, w1: dict) -> dict:
        """Event ``step`` of W1 (``W1_EVENTS``); ``w1`` follows the original branch's leaf."""
        ctl = self.ctl
        if ctl.session_id != w1["session"]:
            ctl.open_session(w1["session"])
        texts = w1_texts(ctl.engine.tokenize)
        k = W1_EDITS[step // 2]
        if step % 2 == 0:
            edited = ctl.edit(w1["users"][k - 1], texts["edits"][k])
            return self.event(W1_EVENTS[step], edited, ctl.generate_reply())
        ctl.select(w1["leaf"])
        asked = ctl.send(texts["follow_ups"][step // 2])
        reply = ctl.generate_reply()
        w1["leaf"] = reply.id
        return self.event(W1_EVENTS[step], asked, reply)

    def build_w1(self) -> dict:
        from sessions.controller.conversation import Conversation

        ctl = self.ctl
        texts = w1_texts(ctl.engine.tokenize)
        session = self.store.create_session(system_prompt=texts["system"], sampling=self.sampling)
        conv = Conversation(self.store, session.id)  # scripted turns, written straight to the store
        conv.append("system", texts["system"], parent_id=None)
        users = []
        for user, reply in zip(texts["users"], texts["replies"], strict=True):
            users.append(conv.append("user", user))
            conv.append("assistant", reply)
        ctl.open_session(conv.session_id)
        deferred = self.branches.deferred_seconds
        build = ctl.warm()
        deferred = self.branches.deferred_seconds - deferred
        leaf = ctl.snapshot().head
        self.built, self.build_seconds = leaf.id, build.seconds
        bare = self.scratch(leaf.id)
        emit({"model": self.label, "event": "build: one prefill of the 12-turn chat",
              **costs.critical_path(build, deferred),
              "no_checkpoints": costs.critical_path(bare, 0.0)})
        self.checkpoints.flush()
        return {"session": ctl.session_id, "leaf": leaf.id, "users": [u.id for u in users]}

    def disk(self) -> dict:
        from sessions.controller.branch_tokens import branch_tokens

        tree = self.ctl.snapshot().tree
        frozen = self.store.session_tokens(self.ctl.session_id)
        unique = sum(len(t.get(self.fingerprint, [])) for t in frozen.values())
        per_branch = [len(branch_tokens(self.store, self.ctl.engine, tree.path_to(leaf.id))[0])
                      for leaf in tree.leaves()]
        live = self.branches
        whole = live.ctx.state_size(0)
        kv = costs.kv_bytes_per_token(live.ctx, live.kind, len(live.live))
        return costs.disk_use(self.root / "checkpoints", unique, sum(per_branch), len(per_branch),
                              whole, len(live.live), kv)

    def placement_fields(self) -> dict:
        """Where the layers went: ``-ngl`` as resolved (``auto`` included) and the devices."""
        from sessions.llama.placement import describe_devices

        engine = self.ctl.engine
        return {"n_gpu_layers": engine.ctx.params.n_gpu_layers, "devices": describe_devices(engine) or "CPU"}

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.ctx.close()
        self.ctl.close()
        self.checkpoints.close()
        self.store.close()


W1_EDITS = (2, 6, 11)
W1_EVENTS = tuple(name for k in W1_EDITS
                  for name in (f"edit user turn {k}", f"switch back after edit {k} + next reply"))


def event_in_new_process(args: argparse.Namespace, label: str, path: Path, root: Path, step: int, w1: dict) -> dict:
    """One W1 event in a child process of this module (``--w1-event``); its record."""
    import subprocess

    state = root / "w1.json"
    state.write_text(json.dumps(w1))
    command = [sys.executable, "-m", "tests.bench.branching", "--w1-event", str(step), "--w1-state", str(state),
               "--model", str(path), "--label", label, "--root", str(root), "--threads", str(args.threads),
               "--reply-tokens", str(args.reply_tokens), "--ngl", str(args.ngl), "--cache-type", args.cache_type]
    out = subprocess.run(command, capture_output=True, text=True, cwd=Path(__file__).resolve().parents[2])
    if out.returncode != 0:
        raise RuntimeError(f"W1 event {step} failed in its process:\n{out.stderr[-4000:]}")
    print(out.stdout, end="", flush=True)
    w1.update(json.loads(state.read_text()))
    return json.loads(out.stdout.strip().splitlines()[-1])


def w1_event_child(args: argparse.Namespace) -> int:
    """``--w1-event``: load the model, run one event on the stored chat, and leave."""
    state = Path(args.w1_state)
    w1 = json.loads(state.read_text())
    bench = Bench(args.label, Path(args.model[0]), args.threads, args.reply_tokens, Path(args.root), None, args.ngl,
                  args.cache_type)
    bench.w1_event(args.w1_event, w1)
    bench.close()
    state.write_text(json.dumps(w1))
    return 0


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
    asked = ctl.send("One more question about all of that, please.")
    bench.event("reopen: continue with a new message", asked, ctl.generate_reply())
    emit({"model": label, "event": "turn overhead", **turn_overhead(bench)})
    bench.close()


def models(args) -> list[tuple[str, Path]]:
    from sessions.synth import SHAPES, make_model

    window = {"tiny": 64, "bench": 512, "gpu": 1024}[args.size]
    found = [(arch, make_model(arch, args.size, swa_window=window)) for arch in args.arch]
    found += [(name, make_model(SHAPES[name].arch, name)) for name in getattr(args, "shape", [])]
    return found + [(Path(p).name, Path(p).expanduser().resolve()) for p in args.model]


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
    parser.add_argument("--w1-event", type=int, help=argparse.SUPPRESS)  # a child of --each-event process
    parser.add_argument("--w1-state", help=argparse.SUPPRESS)
    parser.add_argument("--label", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
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
    for label, path in models(args):
        emit({"model": label, "event": "identity", **costs.identity(path)})
        with tempfile.TemporaryDirectory(prefix="llamachat-bench-") as tmp:
            root = Path(tmp)
            os.environ["LLAMACHAT_CACHE_DIR"] = str(root / "cache")
            bench = Bench(label, path, args.threads, args.reply_tokens, root, rpc, args.ngl, args.cache_type)
            emit({"model": label, "event": "load", "seconds": round(bench.load_seconds, 3),
                  "kind": bench.ctl.engine.info.kind.value, "n_params": bench.ctl.engine.info.n_params,
                  "cache_type": args.cache_type, **bench.placement_fields()})
            w1 = bench.run_w1(args.each_event, args)
            bench.close()
            if not args.w1_only:
                reopen(label, path, args.threads, args.reply_tokens, root, w1, rpc, args.ngl, args.cache_type,
                       args.reopens)
    return 0


if __name__ == "__main__":
    sys.exit(main())
