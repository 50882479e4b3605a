"""Checking the ``[presets.NAME]`` tables: named sets of sampling values of the user's own.

Like the ``[models]`` tables, the names are the user's, so each table is checked on its
own and a bad value costs only that value, named with its table and line. A preset holds
only the settings it names (a ``[sampling]`` key each, checked by the same rules); the
settings dialog applies it over a chat's values.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from sessions.config.type_words import kind_of
from sessions.sampling import BOUNDS, SamplingSettings

Report = Callable[[tuple[str, ...], str], None]
"""``report(key path, message)``: where problems go (the validator's checker)."""

KEYS = tuple(BOUNDS)


def check_presets(data: Any, report: Report) -> dict[str, dict[str, float | int]]:
    """The valid ``[presets.NAME]`` tables of ``data`` (the ``presets`` value from TOML)."""
    if not isinstance(data, dict):
        report(("presets",), f"presets must be tables such as [presets.precise], not {kind_of(data)}; ignoring it")
        return {}
    presets: dict[str, dict[str, float | int]] = {}
    kinds = {name: type(getattr(SamplingSettings(), name)) for name in KEYS}
    for name, table in data.items():
        shown = f"presets.{name}"
        if not name.strip():
            report(("presets", name), f"{shown}: a preset needs a name; ignoring it")
            continue
        if not isinstance(table, dict):
            report(("presets", name), f"{shown} must be a table of sampling settings, not {kind_of(table)}; "
                                      "ignoring it")
            continue
        values: dict[str, float | int] = {}
        for key, value in table.items():
            where = f"{shown}.{key}"
            if key not in KEYS:
                close = difflib.get_close_matches(key, KEYS, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(KEYS)}"
                report(("presets", name, key), f"unknown setting {where!r} ignored ({hint})")
                continue
            kind, (low, high) = kinds[key], BOUNDS[key]
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number or (kind is int and not isinstance(value, int)):
                words = "a whole number" if kind is int else "a number"
                report(("presets", name, key), f"{where} must be {words}, not {kind_of(value)} ({value!r}); "
                                               "ignoring it")
            elif not low <= value <= high or value != value:
                report(("presets", name, key), f"{where} is {value!r}, outside {low}..{high}; ignoring it")
            else:
                values[key] = kind(value)
        presets[name] = values
    return presets
