"""How an engine is made: the settings the controller hands to the engine factory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessions import paths
from sessions.config.model import CheckpointConfig
from sessions.llama.cache_types import DEFAULT as DEFAULT_CACHE_TYPE
from sessions.llama.cache_types import type_id
from sessions.llama.context import ContextParams
from sessions.llama.offload import AUTO, GpuLayers
from sessions.templates.override import (
    ModelTemplateRule,
    TemplateOverride,
    override_for,
    resolve_file,
    rules_from_config,
    variables_for,
)

if TYPE_CHECKING:
    from sessions.config import Config

_CHECKPOINTS = CheckpointConfig()


@dataclass(frozen=True)
class EngineSettings:
    """How the controller makes an engine; filled from the config and the command line."""

    n_ctx: int = 8192
    n_batch: int = 512
    n_gpu_layers: GpuLayers = AUTO
    """A number of layers, ``"all"`` or ``"auto"`` (``sessions.llama.offload``)."""
    threads: int | None = None
    cache_type_k: str = DEFAULT_CACHE_TYPE
    cache_type_v: str = DEFAULT_CACHE_TYPE
    """The K and V cache types (``sessions.llama.cache_types``)."""
    checkpoint_interval: int = 2048
    rpc: tuple[str, ...] = ()
    """RPC servers (``host:port``) whose devices take offloaded layers; when set, the model
    runs in a child process so that a server that dies takes only that process down."""
    tensor_split: tuple[float, ...] = ()
    """Share of the offloaded layers per device, RPC servers first (llama.cpp's ``-ts``);
    empty: by each device's free memory."""
    checkpoint_ram_mb: int = _CHECKPOINTS.ram_mb
    """Budgets of the checkpoint store the child process opens (RPC only)."""
    checkpoint_disk_bytes: int = _CHECKPOINTS.max_disk
    parked_mb: int = _CHECKPOINTS.parked_mb
    """Memory of the model's own for branches left a moment ago (``CheckpointConfig.parked_mb``)."""
    chat_template_file: Path | None = None
    """A chat template file used for every model instead of its own (``--chat-template-file``)."""
    model_templates: tuple[ModelTemplateRule, ...] = ()
    """Chat templates and their variables for the models a ``[models."NAME"]`` config
    table names."""
    chat_template_kwargs: tuple[tuple[str, Any], ...] = ()
    """Variables given to every model's chat template (``Config.chat_template_kwargs``)."""

    def template_override(self, model: Path) -> TemplateOverride | None:
        """The chat template the user chose for ``model``, if any (see ``sessions.templates.override``)."""
        everywhere = None
        if self.chat_template_file is not None:
            everywhere = TemplateOverride("--chat-template-file", file=self.chat_template_file)
        return override_for(Path(model), everywhere=everywhere, rules=self.model_templates)

    def template_variables(self, model: Path) -> dict[str, Any]:
        """The chat template variables for ``model`` (see ``sessions.templates.override.variables_for``)."""
        return variables_for(Path(model), everywhere=dict(self.chat_template_kwargs), rules=self.model_templates)

    def context_params(self) -> ContextParams:
        """The context these settings ask for."""
        return ContextParams(n_ctx=self.n_ctx, n_batch=self.n_batch, n_threads=self.threads,
                             type_k=type_id(self.cache_type_k), type_v=type_id(self.cache_type_v))

    @classmethod
    def from_config(cls, config: Config) -> EngineSettings:
        template_file = getattr(config, "chat_template_file", None)
        return cls(
            n_ctx=config.n_ctx,
            n_batch=config.n_batch,
            n_gpu_layers=config.n_gpu_layers,
            threads=config.threads,
            cache_type_k=config.cache_type_k,
            cache_type_v=config.cache_type_v,
            checkpoint_interval=config.checkpoints.interval,
            chat_template_file=resolve_file(template_file, paths.config_dir()) if template_file else None,
            model_templates=rules_from_config(getattr(config, "models", {}), paths.config_dir()),
            chat_template_kwargs=tuple(getattr(config, "chat_template_kwargs", {}).items()),
            rpc=tuple(config.rpc),
            tensor_split=tuple(config.tensor_split),
            checkpoint_ram_mb=config.checkpoints.ram_mb,
            checkpoint_disk_bytes=config.checkpoints.max_disk,
            parked_mb=config.checkpoints.parked_mb,
        )
