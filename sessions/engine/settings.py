"""How an engine is made: the settings the controller hands to the engine factory."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineSettings:
    """How the controller makes an engine; filled from the config and the command line."""

    n_ctx: int = 8192
    n_batch: int = 512
    n_gpu_layers: int = 0
    threads: int | None = None
    checkpoint_interval: int = 2048

    @classmethod
    def from_config(cls, config) -> EngineSettings:
        return cls(
            n_ctx=config.n_ctx,
            n_batch=config.n_batch,
            n_gpu_layers=config.n_gpu_layers,
            threads=config.threads,
            checkpoint_interval=config.checkpoints.interval,
        )
