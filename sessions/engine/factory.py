"""Build the real engine for the controller from settings and a checkpoint store.

The controller takes a factory rather than an engine so that it can load another model
later (``load_model``) and so that the UI tests can hand it a fake. With RPC servers the
engine runs in a child process (``EngineProcess``) that opens its own store on the same
folder, so that a server that dies ends that process only; ``isolate_rpc=False`` keeps it
in this process (a benchmark that wants the engine's internals and accepts the risk).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from sessions.checkpoints import CheckpointStore
from sessions.engine.chat_engine import LlamaChatEngine
from sessions.engine.process import EngineProcess
from sessions.engine.settings import EngineSettings

if TYPE_CHECKING:
    from sessions.config import Config
    from sessions.engine.protocol import ChatEngine, EngineFactory


def llama_engine_factory(
    checkpoints: CheckpointStore | None = None,
    *,
    on_problem: Callable[[str], None] | None = None,
    isolate_rpc: bool = True,
) -> EngineFactory:
    """A factory ``(path, EngineSettings, on_progress) -> LlamaChatEngine`` (or ``EngineProcess``).

    ``on_problem`` hears the checkpoint notices of an engine process's own store.
    """

    def make(path: Path, settings: EngineSettings, on_progress: Callable[[float], None]) -> ChatEngine:
        if settings.rpc and isolate_rpc:
            return EngineProcess(path, settings, checkpoint_dir=checkpoints.directory if checkpoints else None,
                                 on_progress=on_progress, on_notice=on_problem)

        return LlamaChatEngine(
            path,
            settings.context_params(),
            n_gpu_layers=settings.n_gpu_layers,
            tensor_split=settings.tensor_split,
            rpc=settings.rpc,
            checkpoints=checkpoints,
            interval=settings.checkpoint_interval,
            parking=settings.parked_mb << 20,
            on_progress=on_progress,
            template_override=settings.template_override(path),
            template_variables=settings.template_variables(path),
        )

    return make


def open_checkpoints(config: Config, on_problem: Callable[[str], None] | None = None) -> CheckpointStore | None:
    """The RAM + disk checkpoint store the config asks for (None when turned off).

    ``on_problem`` hears, in plain words, about checkpoint files that failed verification
    and were deleted; it may be called from the store's writer thread.
    """
    if not config.checkpoints.enabled:
        return None
    return CheckpointStore(
        ram_bytes=config.checkpoints.ram_mb << 20,
        disk_bytes=config.checkpoints.max_disk,
        on_problem=on_problem,
    )
