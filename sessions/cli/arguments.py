"""Argument types with plain-words errors, shared by the parser and the subcommands.

The bounds of the llama.cpp-style flags are those of the config file (``-c`` is
``n_ctx``, ``-t`` is ``threads``...): a value llama.cpp would wrap, abort or crash on is
refused here with the flag's name, before anything is loaded.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from sessions.api.settings import (
    ALL_LAYERS,
    AUTO_LAYERS,
    CACHE_TYPES,
    INT32_MAX,
    MAX_CONTEXT,
    MIN_CONTEXT,
    UINT32_MAX,
    EndpointError,
    max_threads,
    parse_endpoints,
    template_value_problem,
)

LARGEST_ID = 2**63 - 1
"""The largest row id SQLite can hold."""


def whole_number(minimum: int | None = None, what: str = "value",
                 maximum: int | None = None) -> Callable[[str], int]:
    """An argparse ``type`` for integers: ``-c abc`` says "context size must be a whole number"."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            message = f"{what} must be a whole number, not {text!r}"
            raise argparse.ArgumentTypeError(message) from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"{what} must be at least {minimum}, not {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{what} must be at most {maximum}, not {value}")
        return value

    parse.__name__ = what
    return parse


session_id = whole_number(1, "session id", LARGEST_ID)
message_id = whole_number(1, "message id", LARGEST_ID)
_context_number = whole_number(0, "context size", MAX_CONTEXT)


def context_size(text: str) -> int:
    """``-c``: 0 (the model's own context) or from ``MIN_CONTEXT`` to ``MAX_CONTEXT`` tokens."""
    value = _context_number(text)
    if 0 < value < MIN_CONTEXT:
        raise argparse.ArgumentTypeError(
            f"context size must be 0 (the model's own) or at least {MIN_CONTEXT}, not {value}")
    return value


context_size.__name__ = "context size"
_layer_count = whole_number(-1, "GPU layers", INT32_MAX)


def gpu_layers(text: str) -> int | str:
    """``-ngl``: a number of layers (-1: every layer), ``auto`` or ``all``, as llama.cpp takes."""
    word = text.strip().lower()
    if word in (AUTO_LAYERS, ALL_LAYERS):
        return word
    if not word.removeprefix("-").isdigit():
        raise argparse.ArgumentTypeError(f'GPU layers must be a number, "auto" or "all", not {text!r}')
    return _layer_count(word)


gpu_layers.__name__ = "GPU layers"


def cache_type(text: str) -> str:
    """``-ctk``/``-ctv``: one of llama.cpp's cache types, in any case."""
    word = text.strip().lower()
    if word not in CACHE_TYPES:
        raise argparse.ArgumentTypeError(f"cache type must be one of {', '.join(CACHE_TYPES)}, not {text!r}")
    return word


cache_type.__name__ = "cache type"
threads = whole_number(1, "threads", max_threads())
seed = whole_number(-1, "seed", UINT32_MAX)


def rpc_servers(text: str) -> list[str]:
    """``--rpc HOST:PORT[,HOST:PORT...]``; an empty text means none (overrides the config)."""
    try:
        return list(parse_endpoints(text))
    except EndpointError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


rpc_servers.__name__ = "RPC servers"


def proportions(text: str) -> list[float]:
    """``-ts 3,1``: one non-negative number per device."""
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"tensor split must be numbers separated by commas, not {text!r}") from None
    if any(value < 0 for value in values):
        raise argparse.ArgumentTypeError(f"tensor split must not hold negative numbers, not {text!r}")
    return values


proportions.__name__ = "tensor split"


def template_kwargs(text: str) -> dict[str, Any]:
    """``--chat-template-kwargs '{"enable_thinking": false}'``: a JSON object, as llama.cpp takes."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise argparse.ArgumentTypeError(f"chat template kwargs must be a JSON object, not {text!r}") from None
    reason = template_value_problem(value, json=True)
    if reason:
        raise argparse.ArgumentTypeError(f"chat template kwargs {reason}")
    return value


template_kwargs.__name__ = "chat template kwargs"
