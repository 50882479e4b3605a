"""Reading single values out of an imported file, with errors that name the field.

Imported files are hand-edited, truncated, produced by other programs or made to do
harm; a wrong type (an author that is a string, ``children: 5``), a NaN or a number too
large for anything must end as one sentence that says where, never as a Python error
deep inside the import.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from sessions.config.type_words import kind_of
from sessions.config.validate import TABLES, check_value
from sessions.exchange.builder import ExchangeError
from sessions.tree import GenerationStats


def mapping(value: Any, where: str, name: str, *, optional: bool = True) -> dict[str, Any]:
    """``value`` when it is an object; ``{}`` for a missing one when ``optional``."""
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise ExchangeError(f"{where}: '{name}' should be an object, found {kind_of(value, json=True)}")
    return value


def listing(value: Any, where: str, name: str) -> list[Any]:
    """``value`` when it is a list; ``[]`` for a missing one."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ExchangeError(f"{where}: '{name}' should be a list, found {kind_of(value, json=True)}")
    return value


def number(value: Any, where: str, name: str) -> float | None:
    """A finite number (None stays None)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ExchangeError(f"{where}: '{name}' should be a number, found {kind_of(value, json=True)}")
    try:
        result = float(value)
    except OverflowError:
        result = math.inf
    if not math.isfinite(result):
        raise ExchangeError(f"{where}: '{name}' is not a usable number ({value!r})")
    return result


def stats(data: Mapping[str, Any] | None, where: str) -> GenerationStats | None:
    """Generation stats with every number finite, not negative (a seed may be -1), of the right kind."""
    if data is None:
        return None
    values: dict[str, Any] = {}
    for field in fields(GenerationStats):
        raw = data.get(field.name)
        if raw is None or field.name == "sampled_by":  # no tokens are imported: none were sampled here
            continue
        if isinstance(field.default, bool):
            if not isinstance(raw, bool):
                raise ExchangeError(
                    f"{where}: 'stats.{field.name}' should be true or false, found {kind_of(raw, json=True)}")
            values[field.name] = raw
            continue
        if field.type == "str" or isinstance(field.default, str):
            if not isinstance(raw, str):
                raise ExchangeError(
                    f"{where}: 'stats.{field.name}' should be a string, found {kind_of(raw, json=True)}")
            values[field.name] = raw
            continue
        found = number(raw, where, f"stats.{field.name}") or 0.0
        if found < (-1 if field.name == "seed" else 0) or found > 2**63:  # a seed of -1: not recorded
            raise ExchangeError(f"{where}: 'stats.{field.name}' is out of range ({raw!r})")
        values[field.name] = int(found) if isinstance(field.default, int) else found
    return GenerationStats(**values)


def sampling(data: Mapping[str, Any] | None, where: str) -> dict[str, Any] | None:
    """The sampling settings a file names, checked against the same bounds as the config
    file's ``[sampling]`` table (the ones it leaves out are the importer's to choose)."""
    if data is None:
        return None
    rules = TABLES["sampling"][1]
    values: dict[str, Any] = {}
    for name, raw in data.items():
        rule = rules.get(name)
        if rule is None:
            continue  # from a newer llamachat: dropped, as when a session is read
        value, problem = check_value(rule, raw)
        if problem:
            raise ExchangeError(f"{where}: the sampling setting '{name}' {problem}")
        values[name] = value
    return values
