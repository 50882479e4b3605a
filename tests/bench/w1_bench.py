"""W1 on one model: its chat built in one prefill, its six branch events, and what they cost.

``Bench`` holds one model's controller, checkpoint store and session store, as the app
holds them, and emits one JSON record per step (``branching`` documents the fields). An
event runs in it, in fresh objects, or in a process of its own (``event_in_new_process``,
which runs ``branching``'s ``--w1-event``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tests.bench import costs, kv_bytes
from tests.bench.overhead import TOKENS_ADDED
from tests.bench.workload import w1_context, w1_texts

DISK_BYTES = 50 << 30
"""The checkpoints' disk budget: more than any tree here takes, so that what it takes is measured
(what the app's default budget holds is reported: ``kv_bytes.disk_against_kv``)."""


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


class Bench:
    def __init__(self, label: str, path: Path, threads: int, reply_tokens: int, root: Path, rpc=None, ngl=0,
                 cache_type: str = "f16", *, spec=None, ram_mb: int | None = None):
        """``spec``: a made model's ``ModelSpec`` (its KV bytes are checked against the
        context's); ``ram_mb``: the checkpoints' RAM tier (default: the app's)."""
        from sessions.api.chat import EngineSettings, SessionController
        from sessions.checkpoints import CheckpointStore
        from sessions.config.model import CheckpointConfig
        from sessions.engine.factory import llama_engine_factory
        from sessions.sampling import SamplingSettings
        from sessions.store import SessionStore

        self.label, self.path, self.root = label, path, root
        self.threads, self.ngl, self.cache_type = threads, ngl, cache_type
        split = dict(rpc=rpc.endpoints, tensor_split=(1.0, 1.0)) if rpc else {}
        n_ctx = w1_context(path, reply_tokens, after=TOKENS_ADDED)  # the same in every process of a run
        self.settings = EngineSettings(n_ctx=n_ctx, n_batch=512, threads=threads, n_gpu_layers=ngl,
                                       cache_type_k=cache_type, cache_type_v=cache_type, **split)
        self.traffic = rpc
        self.events: list[tuple[int, int, dict]] = []
        """(the message its prompt ends with, the reply, the record) of each event timed, in order."""
        self.built, self.build_seconds = 0, 0.0
        """The leaf of W1's chat and the seconds of its one prefill (``run_w1``)."""
        self.sampling = SamplingSettings(temperature=0.0, max_tokens=reply_tokens)
        self.reply_tokens = reply_tokens
        self.ram_mb = CheckpointConfig().ram_mb if ram_mb is None else ram_mb
        self.checkpoints = CheckpointStore(root / "checkpoints", ram_bytes=self.ram_mb << 20, disk_bytes=DISK_BYTES)
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
        kv_bytes.counted(self.branches.ctx)
        self.mark()
        self.prepared: list = []
        """Every ``prepare`` result of the engine, for what the reply stats leave out (bytes)."""
        prepare = self.branches.prepare
        self.branches.prepare = lambda *a, **k: self.prepared.append(prepare(*a, **k)) or self.prepared[-1]
        self.spec = spec
        self.kv: kv_bytes.KvBytes | None = None
        """The model's KV bytes per token, measured on W1's chat once it is built."""
        self._moved = (0, 0)
        """``ctx.bytes_read`` and ``bytes_written`` when the last event (or the build) ended."""
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

    def mark(self) -> None:
        """Count the bytes the context copies out and in from here (``moved``)."""
        ctx = self.branches.ctx
        self._moved = (ctx.bytes_read, ctx.bytes_written)

    def moved(self) -> tuple[int, int]:
        """State bytes copied out of and into the model's memory since ``mark``."""
        ctx = self.branches.ctx
        return ctx.bytes_read - self._moved[0], ctx.bytes_written - self._moved[1]

    def kv_per_token(self) -> kv_bytes.KvBytes:
        """The model's KV bytes per token, measured once on the live branch."""
        if self.kv is None:
            live = self.branches
            self.kv = kv_bytes.measure(live.ctx, live.kind, len(live.live), self.spec)
        return self.kv

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
            **self.bytes_fields(prepared, stats.tokens_evaluated + self.tokens_of(reply.id)),
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

    def bytes_fields(self, prepared, decoded: int) -> dict:
        """What an event moved: the checkpoint bytes its route restored, by tier; the state
        bytes written into the context (restores) and copied out of it (the checkpoints of
        the ``decoded`` tokens, prompt and reply, read out after the reply)."""
        read, written = self.moved()
        kv = self.kv_per_token().per_token * decoded
        return {**(kv_bytes.restored_by_tier(prepared.plan) if prepared else {}),
                "bytes_written": written, "tokens_decoded": decoded, "bytes_read": read,
                "bytes_read_vs_kv_of_decoded": round(read / kv, 3) if kv else None}

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
                              self.cache_type, spec=self.spec, ram_mb=self.ram_mb)
                bench.from_scratch = self.from_scratch
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
                   "prompt_state_seconds": round(sum(e.get("prompt_state_seconds", 0.0) for e in events), 3),
                   **{key: sum(e.get(key, 0) for e in events)
                      for key in ("bytes_restored", "bytes_restored_ram", "bytes_restored_disk", "bytes_written",
                                  "bytes_read", "tokens_decoded")}}
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
        self.mark()
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
        warm = self.branches.ctx.warm
        hits, misses = warm.hits, warm.misses
        self.mark()
        build, read_after = self.read_out_after(ctl.warm)
        path_reads = {"path_reads_into_touched_memory": warm.hits - hits,
                      "path_reads_into_new_memory": warm.misses - misses}
        deferred = self.branches.deferred_seconds - deferred
        read, _ = self.moved()
        leaf = ctl.snapshot().head
        self.built, self.build_seconds = leaf.id, build.seconds
        bare = {"no_checkpoints": costs.critical_path(self.scratch(leaf.id), 0.0)} if self.from_scratch else {}
        emit({"model": self.label, "event": "build: one prefill of the 12-turn chat",
              **costs.critical_path(build, deferred),
              **kv_bytes.read_out(build.tokens_evaluated, read, read_after, self.kv_per_token()), **path_reads, **bare})
        self.checkpoints.flush()
        return {"session": ctl.session_id, "leaf": leaf.id, "users": [u.id for u in users]}

    def read_out_after(self, run):
        """``run()``'s result, and the bytes copied out of the context after its path to
        the first token: by the read-out (``Captures.flush``) that ends a prefill."""
        captures = self.branches.captures
        flush, before = captures.flush, []

        def counted_flush() -> None:
            before.append(self.branches.ctx.bytes_read)
            flush()

        captures.flush = counted_flush
        try:
            result = run()
        finally:
            del captures.flush  # the class's own again
        return result, self.branches.ctx.bytes_read - before[-1] if before else 0

    def disk(self) -> dict:
        from sessions.controller.branch_tokens import branch_tokens

        tree = self.ctl.snapshot().tree
        frozen = self.store.session_tokens(self.ctl.session_id)
        unique = sum(len(t.get(self.fingerprint, [])) for t in frozen.values())
        per_branch = [len(branch_tokens(self.store, self.ctl.engine, tree.path_to(leaf.id))[0])
                      for leaf in tree.leaves()]
        live = self.branches
        whole = live.ctx.state_size(0)
        kv = self.kv_per_token()
        use = costs.disk_use(self.root / "checkpoints", unique, sum(per_branch), len(per_branch),
                             whole, len(live.live), kv.cells_per_token)
        return {**use, "longest_branch_tokens": max(per_branch),
                **kv_bytes.disk_against_kv(use["disk_bytes"], use["snapshot_bytes"], unique, kv)}

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
    """One W1 event in a child process (``branching``'s ``--w1-event``); its record."""
    import subprocess

    state = root / "w1.json"
    state.write_text(json.dumps(w1))
    command = [sys.executable, "-m", "tests.bench.branching", "--w1-event", str(step), "--w1-state", str(state),
               "--model", str(path), "--label", label, "--root", str(root), "--threads", str(args.threads),
               "--reply-tokens", str(args.reply_tokens), "--ngl", str(args.ngl), "--cache-type", args.cache_type,
               "--w1-scale", str(args.w1_scale),
               *(["--ram-mb", str(args.ram_mb)] if args.ram_mb is not None else []),
               *(["--no-scratch"] if args.no_scratch else [])]
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
                  args.cache_type, ram_mb=args.ram_mb)
    bench.from_scratch = not args.no_scratch
    bench.w1_event(args.w1_event, w1)
    bench.close()
    state.write_text(json.dumps(w1))
    return 0
