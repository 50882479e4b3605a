"""Checking the ``[models."NAME"]`` tables: per-model settings, one table per model file.

Kept apart from the flat rules in ``validate`` because the table names are the user's own
(file names and patterns), not a fixed set: each table is checked on its own, and a bad
one costs only that table or key, with the field and line named like every other problem.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from sessions.config import template_kwargs
from sessions.config.model import ModelSettings
from sessions.config.type_words import kind_of

MODEL_KEYS = ("chat_template", "chat_template_file", "chat_template_kwargs")
"""What a ``[models."NAME"]`` table may set (the fields of ``ModelSettings``)."""

Report = Callable[[tuple[str, ...], str], None]
"""``report(key path, message)``: where problems go (the validator's checker)."""


def check_models(data: Any, report: Report) -> dict[str, ModelSettings]:
    """The valid ``[models."NAME"]`` tables of ``data`` (the ``models`` value from TOML)."""
    if not isinstance(data, dict):
        report(("models",), f'models must be tables such as [models."model.gguf"], not {kind_of(data)}; '
                            "ignoring it")
        return {}
    models: dict[str, ModelSettings] = {}
    for name, table in data.items():
        path = ("models", name)
        shown = f'models."{name}"'
        if not name.strip():
            report(path, f"{shown}: a model table needs a file name, a pattern or a path; ignoring it")
            continue
        if not isinstance(table, dict):
            report(path, f"{shown} must be a table of settings, not {kind_of(table)}; ignoring it")
            continue
        values: dict[str, Any] = {}
        for key, value in table.items():
            where = f"{shown}.{key}"
            if key not in MODEL_KEYS:
                close = difflib.get_close_matches(key, MODEL_KEYS, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(MODEL_KEYS)}"
                report((*path, key), f"unknown setting {where!r} ignored ({hint})")
            elif key == "chat_template_kwargs":
                reason = template_kwargs.problem(value)
                if reason:
                    report((*path, key), f"{where} {reason}; ignoring it")
                else:
                    values[key] = value
            elif not isinstance(value, str):
                report((*path, key), f"{where} must be a string, not {kind_of(value)} ({value!r}); ignoring it")
            elif not value.strip():
                report((*path, key), f"{where} is empty; ignoring it")
            else:
                values[key] = value
        if "chat_template" in values and "chat_template_file" in values:
            report((*path, "chat_template"), f"{shown} sets both chat_template and chat_template_file; "
                                             "using chat_template_file")
            del values["chat_template"]
        models[name] = ModelSettings(**values)
    return models
