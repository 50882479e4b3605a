"""Build the real engine for the controller from settings and a checkpoint store.

The controller takes a factory rather than an engine so that it can load another model
later (``load_model``) and so that the UI tests can hand it a fake.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sessions.engine.settings import EngineSettings

if TYPE_CHECKING:
    from sessions.checkpoints import CheckpointStore
    from sessions.config import Config
    from sessions.engine.chat_engine import LlamaChatEngine
    from sessions.engine.protocol import EngineFactory


def llama_engine_factory(checkpoints: CheckpointStore | None = None) -> EngineFactory:
    """A factory ``(path, EngineSettings, on_progress) -> LlamaChatEngine``."""

    def make(path: Path, settings: EngineSettings, on_progress: Callable[[float], None]) -> LlamaChatEngine:
        from sessions.engine.chat_engine import LlamaChatEngine
        from sessions.engine.context import ContextParams

        params = ContextParams(n_ctx=settings.n_ctx, n_batch=settings.n_batch, n_threads=settings.threads)
        return LlamaChatEngine(
            path,
            params,
            n_gpu_layers=settings.n_gpu_layers,
            checkpoints=checkpoints,
            interval=settings.checkpoint_interval,
            on_progress=on_progress,
        )

    return make


def open_checkpoints(config: Config, on_problem: Callable[[str], None] | None = None) -> CheckpointStore | None:
    """The RAM + disk checkpoint store the config asks for (None when turned off).

    ``on_problem`` hears, in plain words, about checkpoint files that failed verification
    and were deleted; it may be called from the store's writer thread.
    """
    from sessions.checkpoints import CheckpointStore

    if not config.checkpoints.enabled:
        return None
    return CheckpointStore(
        ram_bytes=config.checkpoints.ram_mb << 20,
        disk_bytes=config.checkpoints.disk_mb << 20,
        on_problem=on_problem,
    )
