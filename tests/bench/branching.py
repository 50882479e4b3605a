"""Benchmark W1: branch events, reopen, checkpoint overhead and disk use, as JSON lines.

Run: ``python -m tests.bench.branching [--arch gemma3 lfm2] [--reply-tokens 32] [--rpc HOST:PORT,...]``.
It makes bench-size models (about 100M parameters; gemma3 with a 512-token window), builds
a 12-turn chat (system ~200 tokens, user turns ~120, replies ~380), edits user turns 2, 6
and 11, after each edit switches back to the original branch and asks for the next reply,
then reopens the session in fresh objects (new model load, empty RAM tier: everything
comes from disk) and regenerates and continues. Every event is also computed from
scratch (a fresh context evaluating the whole prompt in batches, as a front end without
checkpoints does) for comparison. Figures go to stdout, one JSON object per line. With
``--rpc`` the model is split over those servers (``--ngl`` layers, half each) and each
event also says how many bytes its restore sent over RPC (see ``rpc_traffic``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from tests.bench.overhead import disk_use, turn_overhead
from tests.bench.workload import w1_texts


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


class Bench:
    def __init__(self, arch: str, threads: int, reply_tokens: int, root: Path, rpc=None, ngl: int = 0):
        from sessions.checkpoints import CheckpointStore
        from sessions.controller import EngineSettings, SessionController
        from sessions.engine.factory import llama_engine_factory
        from sessions.sampling import SamplingSettings
        from sessions.store import SessionStore
        from sessions.synth import make_model

        self.arch, self.root = arch, root
        self.path = make_model(arch, "bench", swa_window=512)
        self.settings = EngineSettings(n_ctx=8192, n_batch=512, threads=threads, **(
            dict(rpc=rpc.endpoints, n_gpu_layers=ngl, tensor_split=(1.0, 1.0)) if rpc else {}))
        self.traffic = rpc
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
        self.ctl.load_model(self.path)
        self.fingerprint = self.ctl.engine.info.fingerprint
        self._scratch = None
        if rpc:
            rpc.attach(self)

    def scratch_seconds(self, leaf_id: int) -> float:
        """Prompt time of a fresh context evaluating the branch up to ``leaf_id`` from zero."""
        from sessions.branch_tokens import branch_tokens
        from sessions.engine.branch_engine import BranchEngine
        from sessions.engine.context import ContextParams, LlamaContext

        engine = self.ctl.engine
        if self._scratch is None:
            s = self.settings
            params = ContextParams(n_ctx=s.n_ctx, n_batch=s.n_batch, n_threads=s.threads)
            self._scratch = BranchEngine(engine.model, LlamaContext(engine.model, params), None)
        tokens, ends, _ = branch_tokens(self.store, engine, self.ctl.snapshot().tree.path_to(leaf_id))
        self._scratch._reset()
        return self._scratch.prepare(tokens, ends).seconds

    def tokens_of(self, message_id: int) -> int:
        return len(self.store.get_tokens(message_id, self.fingerprint) or [])

    def event(self, name: str, new_message, reply) -> dict:
        stats = reply.stats
        scratch = self.scratch_seconds(new_message.id)
        record = {
            "arch": self.arch,
            "event": name,
            "new_tokens": self.tokens_of(new_message.id),
            "tokens_restored": stats.tokens_restored,
            "tokens_evaluated": stats.tokens_evaluated,
            "prompt_seconds": round(stats.prompt_seconds, 4),
            "ttft_seconds": round(stats.ttft_seconds, 4),
            "scratch_prompt_seconds": round(scratch, 4),
            "speedup": round(scratch / max(stats.prompt_seconds, 1e-6), 1),
            **(self.traffic.fields() if self.traffic else {}),
        }
        emit(record)
        return record

    def run_w1(self) -> dict:
        ctl = self.ctl
        texts = w1_texts(ctl.engine.tokenize)
        from sessions.conversation import Conversation

        ctl.new_session(system_prompt=texts["system"])
        conv = Conversation(self.store, ctl.session_id)  # scripted turns, written straight to the store
        users = []
        t0 = time.perf_counter()
        for user, reply in zip(texts["users"], texts["replies"], strict=True):
            users.append(conv.append("user", user))
            conv.append("assistant", reply)
        ctl.open_session(conv.session_id)
        build = ctl.warm()
        emit({"arch": self.arch, "event": "build", "tokens": build.tokens_evaluated,
              "seconds": round(time.perf_counter() - t0, 3)})
        leaf = conv.head
        events = []
        for k, follow_up in zip((2, 6, 11), texts["follow_ups"], strict=True):
            edited = ctl.edit(users[k - 1].id, texts["edits"][k])
            events.append(self.event(f"edit user turn {k}", edited, ctl.generate_reply()))
            ctl.select(leaf.id)
            asked = ctl.send(follow_up)
            reply = ctl.generate_reply()
            events.append(self.event(f"switch back after edit {k} + next reply", asked, reply))
            leaf = reply
        evaluated = sum(e["tokens_evaluated"] for e in events)
        new = sum(e["new_tokens"] for e in events)
        ours = sum(e["prompt_seconds"] for e in events)
        scratch = sum(e["scratch_prompt_seconds"] for e in events)
        summary = {
            "arch": self.arch, "event": "W1 summary", "tokens_evaluated": evaluated, "new_tokens": new,
            "evaluated_over_new": round(evaluated / new, 3), "target_evaluated_over_new": 1.1,
            "prompt_seconds": round(ours, 3), "scratch_prompt_seconds": round(scratch, 3),
            "prompt_speedup": round(scratch / ours, 1), "target_speedup": 20,
        }
        emit(summary)
        self.checkpoints.flush()
        emit({"arch": self.arch, "event": "disk", **disk_use(self)})
        return {"session": conv.session_id, "leaf": leaf.id, "texts": texts}

    def close(self) -> None:
        if self._scratch is not None:
            self._scratch.ctx.close()
        self.ctl.close()
        self.checkpoints.close()
        self.store.close()


def exact_after_reopen(bench: Bench, leaf_id: int) -> dict:
    """Logits of the branch restored from disk against a fresh context's, bit for bit."""
    import numpy as np

    from sessions.branch_tokens import branch_tokens
    from sessions.engine.branch_engine import BranchEngine
    from sessions.engine.context import LlamaContext

    engine = bench.ctl.engine
    params = engine.ctx.params  # the engine's own, device split included
    tokens, ends, stepped = branch_tokens(bench.store, engine, bench.ctl.snapshot().tree.path_to(leaf_id))
    restored_ctx, fresh_ctx = LlamaContext(engine.model, params), LlamaContext(engine.model, params)
    try:
        restored = BranchEngine(engine.model, restored_ctx, bench.checkpoints).prepare(tokens, ends, stepped=stepped)
        fresh = BranchEngine(engine.model, fresh_ctx, None).prepare(tokens, ends, stepped=stepped)
    finally:
        restored_ctx.close()
        fresh_ctx.close()
    return {"tokens": len(tokens), "tokens_restored": restored.tokens_restored,
            "bit_identical_logits": bool(np.array_equal(restored.logits, fresh.logits)),
            "max_abs_difference": float(np.max(np.abs(restored.logits - fresh.logits)))}


def reopen(arch: str, threads: int, reply_tokens: int, root: Path, w1: dict, rpc=None, ngl: int = 0) -> None:
    """Fresh objects on the same files: the model is loaded again, RAM holds nothing."""
    bench = Bench(arch, threads, reply_tokens, root, rpc, ngl)
    ctl = bench.ctl
    ctl.open_session(w1["session"])
    last = ctl.snapshot().tree.get(w1["leaf"])
    t0 = time.perf_counter()
    ctl.regenerate(last.id)
    reply = ctl.generate_reply(max_tokens=8)
    wall = time.perf_counter() - t0
    scratch = bench.scratch_seconds(last.parent_id)
    emit({"arch": arch, "event": "reopen: regenerate last reply",
          "ttft_seconds": round(reply.stats.ttft_seconds, 4), "wall_seconds": round(wall, 4),
          "tokens_restored": reply.stats.tokens_restored, "tokens_evaluated": reply.stats.tokens_evaluated,
          "scratch_prompt_seconds": round(scratch, 4),
          "ttft_speedup": round(scratch / max(reply.stats.ttft_seconds, 1e-6), 1), "target_speedup": 50,
          **(bench.traffic.fields() if bench.traffic else {})})
    emit({"arch": arch, "event": "reopen: exactness", **exact_after_reopen(bench, last.parent_id)})
    asked = ctl.send("One more question about all of that, please.")
    bench.event("reopen: continue with a new message", asked, ctl.generate_reply())
    emit({"arch": arch, "event": "turn overhead", **turn_overhead(bench)})
    bench.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", nargs="+", default=["gemma3", "lfm2"])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--reply-tokens", type=int, default=32)
    parser.add_argument("--rpc", metavar="HOST:PORT,...", help="split the models over these RPC servers")
    parser.add_argument("--ngl", type=int, default=12, help="with --rpc: layers on the servers (of 18)")
    args = parser.parse_args(argv)
    from tests.bench.rpc_traffic import RpcTraffic

    rpc = RpcTraffic(args.rpc.split(",")) if args.rpc else None
    from sessions import paths

    # Made models are kept where the user's other runs find them; the rest is per run.
    os.environ.setdefault("LLAMACHAT_MODEL_CACHE", str(paths.made_models_dir()))
    for arch in args.arch:
        with tempfile.TemporaryDirectory(prefix=f"llamachat-bench-{arch}-") as tmp:
            root = Path(tmp)
            os.environ["LLAMACHAT_CACHE_DIR"] = str(root / "cache")
            bench = Bench(arch, args.threads, args.reply_tokens, root, rpc, args.ngl)
            w1 = bench.run_w1()
            bench.close()
            reopen(arch, args.threads, args.reply_tokens, root, w1, rpc, args.ngl)
    return 0


if __name__ == "__main__":
    sys.exit(main())
