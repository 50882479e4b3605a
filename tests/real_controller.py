"""A session controller over a real tiny model and a real checkpoint store, for tests of
whole gesture sequences whose logits must match a recompute."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sessions.api.chat import EngineSettings, SessionController
from sessions.checkpoints import CheckpointStore
from sessions.engine.factory import llama_engine_factory
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore


@contextmanager
def real_controller(folder: Path, store: SessionStore, *, n_batch: int,
                    max_tokens: int) -> Iterator[SessionController]:
    """Greedy replies of ``max_tokens``, a 512-token context on one thread, no GPU."""
    with CheckpointStore(folder / "checkpoints", ram_bytes=64 << 20, disk_bytes=1 << 30) as checkpoints:
        ctl = SessionController(store, engine_factory=llama_engine_factory(checkpoints), checkpoints=checkpoints,
                                settings=EngineSettings(n_ctx=512, n_batch=n_batch, threads=1, n_gpu_layers=0),
                                sampling=SamplingSettings(temperature=0.0, max_tokens=max_tokens))
        try:
            yield ctl
        finally:
            ctl.close()
