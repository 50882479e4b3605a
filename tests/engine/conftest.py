"""Engine fixtures: tiny models of the four memory kinds and a from-scratch reference.

The reference for exactness is a fresh context that evaluates the whole branch from
token 0, with no checkpoint store, using the same segment boundaries and batches as
every other route (batch boundaries decide the floating-point state).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from sessions.synth import make_model

ARCHS = ("llama", "gemma3", "lfm2", "mamba")
"""One architecture of each memory kind: every route is tested on each."""
NEW_ARCHS = ("qwen35", "qwen3next", "gemma4", "gpt-oss", "granitehybrid", "mamba2")
"""The architectures of late 2026 (``sessions.synth``): the routes their memory meets
differently (a new process, a window ring passed, a cut inside a long message, a reply
continued) are tested on each, the gestures as a whole in ``tests/controller``."""
ALL_ARCHS = ARCHS + NEW_ARCHS
HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test in this folder loads real models: mark it ``engine`` (``-m "not engine"`` skips them)."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.engine)
SWA_WINDOW = 32


@pytest.fixture(scope="session")
def model_paths() -> dict[str, Path]:
    return {arch: make_model(arch, "tiny", swa_window=SWA_WINDOW) if arch in ARCHS else make_model(arch, "tiny")
            for arch in ALL_ARCHS}


@pytest.fixture(scope="session")
def loaded_models(model_paths):
    from sessions.llama.model import LlamaModel

    models = {arch: LlamaModel(path) for arch, path in model_paths.items()}
    yield models
    for model in models.values():
        model.close()


@dataclass
class Reference:
    logits: np.ndarray
    greedy: list[int]


def greedy_after(branch_engine, logits: np.ndarray, n: int = 32) -> list[int]:
    """A greedy continuation of ``n`` tokens (end tokens included, nothing stops it)."""
    out = []
    pos = len(branch_engine.live)
    for _ in range(n):
        token = int(np.argmax(logits))
        out.append(token)
        logits = branch_engine.ctx.decode([token], pos)
        pos += 1
    if branch_engine.kind.value == "plain":
        branch_engine.ctx.seq_rm(0, len(branch_engine.live), -1)
    else:
        branch_engine._reset()
    return out
