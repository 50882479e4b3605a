"""Checkpoint files damaged on disk: each detected, reported, deleted, recomputed exactly.

A checkpoint is restored straight into llama.cpp, which trusts whatever bytes it is
given: a torn file, a flipped bit or the state of another model (same shape, other
weights) would restore silently and make every later reply garbage. So for every kind
of damage, on every memory kind, a branch is saved, one of the files a restore will
read is damaged, and a fresh store and engine restore the branch. The damage must be
reported in plain words naming the file, the file deleted, the branch's logits and a
greedy continuation bit-identical to a from-scratch run, and the file written again
byte for byte as it was before the damage.
"""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sessions.branching.branch_engine import BranchEngine
from sessions.branching.segments import message_ends
from sessions.branching.snapshot_policy import SnapshotPolicy
from sessions.checkpoints import CheckpointStore, Kind, prefix_hash
from sessions.checkpoints.file_format import HEADER_SIZE, parse_header
from sessions.checkpoints.keys import address
from sessions.llama.context import ContextParams, LlamaContext
from sessions.synth import make_model

from .crash_checks import verify_file

PARAMS = ContextParams(n_ctx=2048, n_batch=64, n_threads=1)
INTERVAL = 48
"""Short, so long messages get checkpoints inside them as well as at their ends."""
TEXTS = [
    "You are a helpful assistant who answers briefly.",
    "Tell me about the sea and the boats that sail on it at night, " * 3,
    "The sea is wide and the boats carry lights so that others can see them.",
    "And what about the stars above the water?",
    "Stars guide the sailors; they read them like a map of the sky.",
]
KINDS = ("truncated-header", "truncated-payload", "emptied", "appended", "flipped-header",
         "flipped-state", "flipped-logits", "swapped", "foreign-model")
BUDGET = dict(ram_bytes=256 << 20, disk_bytes=1 << 30)


@dataclass(frozen=True)
class CheckpointOutcome:
    arch: str
    kind: str
    detected: bool
    """The store reported the damaged file by name."""
    report: str | None
    deleted: bool
    exact: bool
    """Logits and a 32-token greedy continuation equal the from-scratch run's."""
    rewritten: bool
    """The file was saved again, identical to the undamaged original."""
    recomputed: int

    @property
    def ok(self) -> bool:
        return self.detected and self.deleted and self.exact and self.rewritten and self.recomputed > 0


def model_path(arch: str, seed: int = 0) -> Path:
    return make_model(arch, "tiny", swa_window=32 if arch == "gemma3" else 64, seed=seed)


def greedy_after(engine: BranchEngine, logits: np.ndarray, n: int = 32) -> list[int]:
    out, pos = [], len(engine.live)
    for _ in range(n):
        token = int(np.argmax(logits))
        out.append(token)
        logits = engine.ctx.decode([token], pos)
        pos += 1
    return out


def corrupt_bytes(kind: str, data: bytes, rng: random.Random, other: bytes) -> bytes:
    """``data`` damaged as ``kind`` says (``other`` is another file: swap and foreign)."""
    header = parse_header(data[:HEADER_SIZE])
    state_end = HEADER_SIZE + header.state_len
    spans = {"flipped-header": (0, HEADER_SIZE), "flipped-state": (HEADER_SIZE, state_end),
             "flipped-logits": (state_end, len(data))}
    if kind in spans:
        lo, hi = spans[kind]
        damaged = bytearray(data)
        damaged[rng.randrange(lo, hi)] ^= 1 << rng.randrange(8)
        return bytes(damaged)
    return {
        "truncated-header": data[: HEADER_SIZE // 2],
        "truncated-payload": data[: HEADER_SIZE + header.state_len // 2],
        "emptied": b"",
        "appended": data + bytes(64),
        "swapped": other,
        "foreign-model": other,
    }[kind]


class CheckpointTrials:
    """Every kind of damage on one memory kind's model, against one reference run."""

    def __init__(self, workdir: Path, arch: str, rng: random.Random) -> None:
        from sessions.llama.model import LlamaModel

        self.work, self.arch, self.rng = workdir, arch, rng
        quiet = lambda _fraction: None  # noqa: E731 - llama.cpp prints dots without one
        self.model = LlamaModel(model_path(arch), on_progress=quiet)
        self.foreign = LlamaModel(model_path(arch, seed=1), on_progress=quiet)
        msgs = [self.model.tokenize(text, add_bos=(i == 0)) for i, text in enumerate(TEXTS)]
        self.tokens = [t for m in msgs for t in m]
        self.ends = message_ends([len(m) for m in msgs])
        engine = self._engine(self.model, None)
        result = engine.prepare(self.tokens, self.ends)
        self.reference = (result.logits, greedy_after(engine, result.logits))
        engine.ctx.close()

    def close(self) -> None:
        self.model.close()
        self.foreign.close()

    def _engine(self, model, store) -> BranchEngine:
        # Snapshots at every boundary, all on disk: every kind of file a restore reads exists.
        policy = SnapshotPolicy(every_boundary=True)
        return BranchEngine(model, LlamaContext(model, PARAMS), store, interval=INTERVAL, policy=policy)

    def _save_branch(self, model, folder: Path):
        with CheckpointStore(folder, **BUDGET) as store:
            engine = self._engine(model, store)
            engine.prepare(self.tokens, self.ends)
            plan = self._engine(model, store).plan(self.tokens, self.ends)
            engine.ctx.close()
        return engine.compat, plan

    def _file(self, folder: Path, compat, end: int, kind: Kind) -> Path:
        return folder / address(compat, prefix_hash(self.tokens[:end]), kind)

    def run(self, kind: str) -> CheckpointOutcome:
        folder = self.work / f"{self.arch}-{kind}"
        shutil.rmtree(folder, ignore_errors=True)
        compat, plan = self._save_branch(self.model, folder)
        read: list[tuple[Kind, int]] = [("cells", info.end) for info in plan.restore]
        if plan.snapshot is not None and (plan.snapshot.has_state or kind != "flipped-state"):
            read.append(("snapshot", plan.snapshot.end))
        with_logits = [("snapshot", plan.snapshot.end)] if plan.snapshot and plan.snapshot.has_logits else []
        file_kind, end = self.rng.choice(with_logits if kind == "flipped-logits" else read)
        victim = self._file(folder, compat, end, file_kind)
        original = victim.read_bytes()
        other = b""
        if kind == "swapped":
            others = [p for p in victim.parent.iterdir() if p != victim and p.suffix == victim.suffix]
            other = self.rng.choice(others).read_bytes()
        elif kind == "foreign-model":
            foreign_folder = self.work / f"{self.arch}-{kind}-other-model"
            foreign_compat, _ = self._save_branch(self.foreign, foreign_folder)
            other = self._file(foreign_folder, foreign_compat, end, file_kind).read_bytes()
        victim.write_bytes(corrupt_bytes(kind, original, self.rng, other))
        problems: list[str] = []
        with CheckpointStore(folder, on_problem=problems.append, **BUDGET) as store:
            engine = self._engine(self.model, store)
            result = engine.prepare(self.tokens, self.ends)
            deleted = store.stats().corrupt_deleted == 1
            greedy = greedy_after(engine, result.logits)
            engine.ctx.close()
        report = next((p for p in problems if victim.name in p), None)
        exact = np.array_equal(result.logits, self.reference[0]) and greedy == self.reference[1]
        rewritten = victim.is_file() and verify_file(victim) is None and victim.read_bytes() == original
        return CheckpointOutcome(self.arch, kind, report is not None, report, deleted, exact, rewritten,
                                 result.tokens_evaluated)
