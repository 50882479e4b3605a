"""How an engine is made: the settings the controller hands to the engine factory."""

from __future__ import annotations

from dataclasses import dataclass

from sessions.config.model import CheckpointConfig

_CHECKPOINTS = CheckpointConfig()


@dataclass(frozen=True)
class EngineSettings:
    """How the controller makes an engine; filled from the config and the command line."""

    n_ctx: int = 8192
    n_batch: int = 512
    n_gpu_layers: int = 0
    threads: int | None = None
    checkpoint_interval: int = 2048
    rpc: tuple[str, ...] = ()
    """RPC servers (``host:port``) whose devices take offloaded layers; when set, the model
    runs in a child process so that a server that dies takes only that process down."""
    tensor_split: tuple[float, ...] = ()
    """Share of the offloaded layers per device, RPC servers first (llama.cpp's ``-ts``);
    empty: by each device's free memory."""
    checkpoint_ram_mb: int = _CHECKPOINTS.ram_mb
    """Budgets of the checkpoint store the child process opens (RPC only)."""
    checkpoint_disk_mb: int = _CHECKPOINTS.disk_mb

    @classmethod
    def from_config(cls, config) -> EngineSettings:
        return cls(
            n_ctx=config.n_ctx,
            n_batch=config.n_batch,
            n_gpu_layers=config.n_gpu_layers,
            threads=config.threads,
            checkpoint_interval=config.checkpoints.interval,
            rpc=tuple(config.rpc),
            tensor_split=tuple(config.tensor_split),
            checkpoint_ram_mb=config.checkpoints.ram_mb,
            checkpoint_disk_mb=config.checkpoints.disk_mb,
        )
