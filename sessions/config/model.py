"""The typed settings object: what ``config.toml`` may contain, with its defaults.

Frozen dataclasses rather than a dict so every reader of the config gets a value of the
right type (the loader has already checked it) and a typo in code is an AttributeError,
not a silent ``None``. Each field carries a docstring: it is the reference the commented
template and the help screen are written from.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from sessions.llama.cache_types import DEFAULT as DEFAULT_CACHE_TYPE
from sessions.llama.offload import AUTO, GpuLayers
from sessions.sampling import SamplingSettings

DEFAULT_THEME = "llamachat-dark"

TemplateValue = str | int | float | bool
"""A chat template variable the config may set (``chat_template_kwargs``)."""


@dataclass(frozen=True)
class CheckpointConfig:
    """How much model state is kept so branch switches never re-read the whole prompt.

    The ``[checkpoints]`` table. A checkpoint is the model's memory (KV cache, sliding
    window, recurrent state) at the end of a message; the RAM tier is fast, the disk tier
    survives a restart.
    """

    ram_mb: int = 2048
    """Most memory, in MiB, that checkpoints kept in RAM may use (oldest dropped first)."""
    max_disk: int = 20 << 30
    """Most disk space, in bytes, for checkpoint files in the cache folder (the file writes
    a size: ``"20GiB"``, ``"500MB"``, or a whole number of MiB). The files of the chats
    used least recently go first, the cheapest to recompute first (``sessions.checkpoints``).
    ``disk_mb``, a number of MiB, is read as this setting too; ``max_disk`` wins over it."""
    interval: int = 2048
    """Inside a long message, also save a checkpoint every this many tokens (sliding-window
    and recurrent models save closer: ``sessions.branching.snapshot_policy.restart_spacing``)."""
    parked_mb: int = 1024
    """Most memory, in MiB, of the model's own memory (a GPU's, where its layers run) that the
    branches left a moment ago may keep there whole, so that going back to one moves
    nothing through the host (``sessions.branching.live``); 0 turns it off. Used only
    where layers are offloaded: on the CPU alone the RAM tier does the same."""
    enabled: bool = True
    """Turn checkpoints off to always recompute the prompt (slower, uses no extra memory)."""


@dataclass(frozen=True)
class ModelSettings:
    """Settings for the models one ``[models."NAME"]`` table names.

    ``NAME`` is a file name (``*`` matches any text and ``?`` one character, as in ``"gemma-3-*.gguf"``) or
    a path (it has a ``/``); a path wins over a file name, which wins over a pattern.
    """

    chat_template: str | None = None
    """A built-in template's name (``chatml``, ``gemma``, ``llama3``, ...) or Jinja text,
    used instead of the template inside the model file."""
    chat_template_file: str | None = None
    """A Jinja chat template file used instead of the one inside the model file (a path
    relative to the config file's folder, or absolute)."""
    chat_template_kwargs: dict[str, TemplateValue] = field(default_factory=dict)
    """Variables given to these models' chat template, over the top-level
    ``chat_template_kwargs`` (``{ enable_thinking = false }``)."""


@dataclass(frozen=True)
class Config:
    """Everything a user can set in ``config.toml``.

    Command-line flags override a few of these for one run (see ``with_overrides``);
    the UI remembers choices such as the theme through ``update_config``.
    """

    model: str | None = None
    """Path of the GGUF model to load at start; unset shows the model picker."""
    model_dirs: list[str] = field(default_factory=list)
    """Extra folders searched (recursively) for ``*.gguf`` files, besides the usual caches."""
    n_ctx: int = 8192
    """Context size in tokens; 0 uses the model's trained context length."""
    n_batch: int = 512
    """Most tokens evaluated in one call while reading a prompt."""
    n_gpu_layers: GpuLayers = AUTO
    """Layers offloaded to the GPUs and RPC servers: a number (0: CPU only, -1: every
    layer), ``"all"``, or ``"auto"``: every layer that fits their free memory (none on
    a machine without a GPU). See ``sessions.llama.offload``."""
    threads: int | None = None
    """CPU threads used for generation; unset uses every core but one (at most 8)."""
    cache_type_k: str = DEFAULT_CACHE_TYPE
    """Type of the K cache: ``f16``, or a quantized type (``q8_0``...) that takes less
    memory per token of context. See ``sessions.llama.cache_types``."""
    cache_type_v: str = DEFAULT_CACHE_TYPE
    """Type of the V cache, likewise."""
    rpc: list[str] = field(default_factory=list)
    """RPC servers (``"host:port"``, started with ``llamachat rpc-server``) whose devices take
    the offloaded layers (``n_gpu_layers``), as llama.cpp's ``--rpc``; empty: this machine only."""
    tensor_split: list[float] = field(default_factory=list)
    """Share of the offloaded layers per device, RPC servers first in ``rpc`` order, then
    local GPUs (llama.cpp's ``--tensor-split``); empty: by each device's free memory."""
    seed: int = -1
    """Seed for sampling replies; -1 picks a new one for every reply. Overrides ``sampling.seed``."""
    system_prompt: str | None = None
    """System message put at the start of every new session; unset adds none."""
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    """Default sampling settings for new sessions (the ``[sampling]`` table)."""
    theme: str = DEFAULT_THEME
    """Name of the colour theme (built in, or a file in the ``themes`` folder beside this file)."""
    tree_width: int | None = None
    """Columns of the tree panel (Ctrl+T); unset: 40% of the window. The app remembers the
    width its ``<`` and ``>`` keys or a drag of its edge set."""
    keys: dict[str, str] = field(default_factory=dict)
    """Key overrides: action id to key string, e.g. ``regenerate = "ctrl+r"`` (``[keys]``)."""
    checkpoints: CheckpointConfig = field(default_factory=CheckpointConfig)
    """Model-state checkpoint limits (the ``[checkpoints]`` table)."""
    undo_minutes: float | None = None
    """How long a deleted message or chat can be brought back (Ctrl+Z); unset: until the
    app closes, 0: never. After that the deletion is final, and a chat's checkpoint files go."""
    chat_template_file: str | None = None
    """A Jinja chat template file used for every model instead of its own (relative to the
    config file's folder); ``--chat-template-file`` sets it for one run."""
    chat_template_kwargs: dict[str, TemplateValue] = field(default_factory=dict)
    """Variables given to every model's chat template, as llama.cpp's
    ``--chat-template-kwargs``: ``{ enable_thinking = false }`` turns Qwen3's reasoning off,
    ``{ reasoning_effort = "high" }`` sets gpt-oss's. A ``[models."NAME"]`` table's own
    values win over these; ``--chat-template-kwargs JSON`` replaces them for one run, and
    its values win over a table's too."""
    models: dict[str, ModelSettings] = field(default_factory=dict)
    """Per-model settings: the ``[models."NAME"]`` tables (see ``ModelSettings``)."""
    presets: dict[str, dict[str, float | int]] = field(default_factory=dict)
    """Named sampling presets of the user's own, ``[presets.NAME]`` tables of ``[sampling]``
    keys: the chat settings dialog (Ctrl+S) applies one to a chat, the values it names only."""

    def with_(self, **changes: Any) -> Config:
        return replace(self, **changes)

    def effective_sampling(self) -> SamplingSettings:
        """The sampling settings with the top-level ``seed`` (and ``--seed``) applied."""
        return self.sampling if self.seed < 0 else self.sampling.with_(seed=self.seed)

    def with_overrides(self, **overrides: Any) -> Config:
        """Apply command-line overrides, ignoring the ones that were not given (None)."""
        given = {name: value for name, value in overrides.items() if value is not None}
        unknown = set(given) - {f.name for f in fields(self)}
        if unknown:
            raise TypeError(f"not config fields: {', '.join(sorted(unknown))}")
        return replace(self, **given)


def default_config() -> Config:
    return Config()
