"""Settings from ``config.toml``: typed, validated field by field, written atomically.

The public names live here; the package is split by concern (the dataclasses, the
field checks, TOML line handling, file reading and writing, the commented template).
May import the words it shares with ``llama``, ``templates`` and ``rpc``; never the engine,
the controller or the store.
"""

from sessions.config.files import (
    ConfigError,
    LoadedConfig,
    load_config,
    save_config,
    to_toml_dict,
    update_config,
)
from sessions.config.model import DEFAULT_THEME, CheckpointConfig, Config, default_config
from sessions.config.template import config_template
from sessions.config.validate import ConfigProblem

__all__ = [
    "DEFAULT_THEME",
    "CheckpointConfig",
    "Config",
    "ConfigError",
    "ConfigProblem",
    "LoadedConfig",
    "config_template",
    "default_config",
    "load_config",
    "save_config",
    "to_toml_dict",
    "update_config",
]
