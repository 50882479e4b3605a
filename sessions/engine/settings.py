"""How an engine is made: the settings the controller hands to the engine factory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sessions.engine.template_override import (
    ModelTemplateRule,
    TemplateOverride,
    override_for,
    resolve_file,
    rules_from_config,
)


@dataclass(frozen=True)
class EngineSettings:
    """How the controller makes an engine; filled from the config and the command line."""

    n_ctx: int = 8192
    n_batch: int = 512
    n_gpu_layers: int = 0
    threads: int | None = None
    checkpoint_interval: int = 2048
    chat_template_file: Path | None = None
    """A chat template file used for every model instead of its own (``--chat-template-file``)."""
    model_templates: tuple[ModelTemplateRule, ...] = ()
    """Chat templates for the models a ``[models."NAME"]`` config table names."""

    def template_override(self, model: Path) -> TemplateOverride | None:
        """The chat template the user chose for ``model``, if any (see ``template_override``)."""
        everywhere = None
        if self.chat_template_file is not None:
            everywhere = TemplateOverride("--chat-template-file", file=self.chat_template_file)
        return override_for(Path(model), everywhere=everywhere, rules=self.model_templates)

    @classmethod
    def from_config(cls, config) -> EngineSettings:
        from sessions import paths

        template_file = getattr(config, "chat_template_file", None)
        return cls(
            n_ctx=config.n_ctx,
            n_batch=config.n_batch,
            n_gpu_layers=config.n_gpu_layers,
            threads=config.threads,
            checkpoint_interval=config.checkpoints.interval,
            chat_template_file=resolve_file(template_file, paths.config_dir()) if template_file else None,
            model_templates=rules_from_config(getattr(config, "models", {}), paths.config_dir()),
        )
