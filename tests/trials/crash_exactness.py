"""The sharpest check after a kill: the restored branch's logits, bit for bit.

The made models have random weights, and their greedy text barely depends on context:
with every checkpoint the children saved sabotaged (the last quarter of each state
zeroed, checksums valid, through a ``sitecustomize`` in the children only), the check
replies restored from those files still printed exactly the from-scratch text. So the
reply comparison alone proves little. Here the trial process itself restores the
session's head branch from a hard-linked copy of the files the killed run left (its own
new files and deletions stay in the copy), then decodes a few greedy tokens, and
compares the logits after the branch and after every one of those tokens with a
from-scratch computation. A wrong state changes them; a right one gives equal bits.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

GREEDY_TOKENS = 8


@dataclass(frozen=True)
class ProbeResult:
    equal: bool
    """Every logits vector equal to the from-scratch one, bit for bit."""
    tokens_restored: int
    problems: list[str]
    """What the checkpoint store reported while restoring (a bad file it deleted)."""
    max_difference: float


class ExactnessProbe:
    """One engine per model, made with the trial's own config, reused for every check."""

    def __init__(self, models: dict[str, str], config_path: Path) -> None:
        from sessions.api.chat import EngineSettings
        from sessions.config import load_config
        from sessions.engine.factory import llama_engine_factory

        settings = EngineSettings.from_config(load_config(config_path).config)
        make = llama_engine_factory(None)
        self.interval = settings.checkpoint_interval
        self.engines = {arch: make(Path(path), settings, lambda _fraction: None)
                        for arch, path in models.items()}

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()

    def compare(self, arch: str, db: Path, session_id: int, checkpoints: Path, work: Path) -> ProbeResult:
        """Restore ``session_id``'s head branch from ``checkpoints`` and from nothing."""
        from sessions.checkpoints import CheckpointStore
        from sessions.controller.branch_tokens import branch_tokens
        from sessions.controller.conversation import Conversation
        from sessions.store import SessionStore

        engine = self.engines[arch]
        with SessionStore.open(db) as store:  # a copy: frozen tokens computed here stay in it
            path = Conversation(store, session_id).active_path()
            tokens, ends, stepped = branch_tokens(store, engine, path)
        copy = work / "probe-checkpoints"
        shutil.rmtree(copy, ignore_errors=True)
        if checkpoints.is_dir():
            shutil.copytree(checkpoints, copy, copy_function=os.link)
        problems: list[str] = []
        with CheckpointStore(copy, ram_bytes=64 << 20, disk_bytes=1 << 50,
                             on_problem=problems.append) as store:
            restored, count = self._run(engine, store, tokens, ends, stepped)
        fresh, _ = self._run(engine, None, tokens, ends, stepped)
        diffs = [float(np.max(np.abs(a - b))) for a, b in zip(restored, fresh, strict=True)]
        equal = all(np.array_equal(a, b) for a, b in zip(restored, fresh, strict=True))
        return ProbeResult(equal, count, problems, max(diffs) if diffs else 0.0)

    def _run(self, engine, store, tokens, ends, stepped) -> tuple[list[np.ndarray], int]:
        from sessions.branching.branch_engine import BranchEngine

        engine.ctx.clear()  # a new BranchEngine believes its sequence is empty: make it so
        branch = BranchEngine(engine.model, engine.ctx, store, interval=self.interval)
        result = branch.prepare(tokens, ends, stepped=stepped)
        logits, current, pos = [result.logits.copy()], result.logits, len(tokens)
        for _ in range(GREEDY_TOKENS):
            current = engine.ctx.decode([int(np.argmax(current))], pos)
            logits.append(current.copy())
            pos += 1
        return logits, result.tokens_restored
