"""Variables for the chat template, from the config or the command line.

llama.cpp's ``--chat-template-kwargs`` passes extra variables to every render of the
template; reasoning models read theirs from it (``enable_thinking = false`` turns Qwen3's
and Gemma 4's thinking off, ``reasoning_effort = "high"`` sets gpt-oss's). The config takes
them at the top level and per model (``[models."NAME"]``); each is checked here once.
"""

from __future__ import annotations

import math
from typing import Any

from sessions.config.type_words import kind_of

WORDS = "a table of strings, numbers and true or false"
JSON_WORDS = "an object of strings, numbers and true or false"


def template_value(value: Any) -> bool:
    """Text, a finite number or a truth value: what a template may be given from outside."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (str, int, bool))


def problem(value: Any, *, json: bool = False) -> str | None:
    """Why ``value`` cannot be a table of template variables (None: it can); ``json``: in
    JSON's words, for the command line's flag."""
    words = JSON_WORDS if json else WORDS
    if not isinstance(value, dict):
        return f"must be {words}, not {kind_of(value, json=json)}"
    for name, item in value.items():
        if not template_value(item):
            return f"must be {words}; {name!r} is {kind_of(item, json=json)} ({item!r})"
    return None
