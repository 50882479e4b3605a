"""``config.toml``, typed and checked, and the checks of the values the flags give.

Loads nothing heavy: the command line checks its flags with these before anything else.
"""

from __future__ import annotations

from sessions.config import Config, ConfigError, config_template, load_config, update_config
from sessions.config.files import MAX_CONFIG_BYTES, write_config_text
from sessions.config.model import ModelSettings
from sessions.config.sampling_input import LABELS as SAMPLING_LABELS
from sessions.config.sampling_input import SamplingValueError, parse_sampling_value
from sessions.config.sizes import size_text
from sessions.config.template_kwargs import problem as template_value_problem
from sessions.config.validate import INT32_MAX, MAX_CONTEXT, MIN_CONTEXT, UINT32_MAX, max_threads
from sessions.llama.cache_types import CACHE_TYPES
from sessions.llama.offload import ALL as ALL_LAYERS
from sessions.llama.offload import AUTO as AUTO_LAYERS
from sessions.rpc.endpoints import EndpointError, parse_endpoints

__all__ = [
    "ALL_LAYERS",
    "AUTO_LAYERS",
    "CACHE_TYPES",
    "INT32_MAX",
    "MAX_CONFIG_BYTES",
    "MAX_CONTEXT",
    "MIN_CONTEXT",
    "SAMPLING_LABELS",
    "UINT32_MAX",
    "Config",
    "ConfigError",
    "EndpointError",
    "ModelSettings",
    "SamplingValueError",
    "config_template",
    "load_config",
    "max_threads",
    "parse_endpoints",
    "parse_sampling_value",
    "size_text",
    "template_value_problem",
    "update_config",
    "write_config_text",
]
