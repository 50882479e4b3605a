"""Sizes in the config file: ``"20GiB"``, ``"500MB"``, or a whole number of MiB.

A disk budget is thought of in the units a file manager shows, and both kinds of
unit are in use (GB of 1000^3 bytes, GiB of 1024^3), so either is taken as written. A
bare number is MiB, as the ``*_mb`` settings have always been.
"""

from __future__ import annotations

import re
from typing import Any

from sessions.config.type_words import kind_of

UNITS = {
    "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
MAX_SIZE = 2**60
"""Bytes: 2^40 MiB, the bound the MiB settings have."""

_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?)\s*([a-z]+)\s*", re.IGNORECASE)
_SHOWN = ("TiB", "GiB", "MiB", "KiB", "TB", "GB", "MB", "KB")
_WANTED = 'a size such as "20GiB" or "500MB", or a whole number of MiB'


def parse_size(value: Any) -> tuple[int | None, str | None]:
    """``(bytes, None)`` for a valid size, else ``(None, the reason)`` to follow the key's name."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            return None, f"must be at least 0, not {value}"
        nbytes = value << 20 if value <= MAX_SIZE >> 20 else None
        shown = f"{value} MiB" if value < 10**30 else "a number of more than 30 digits"
    elif isinstance(value, str) and (match := _SIZE.fullmatch(value)) and match.group(2).lower() in UNITS:
        nbytes = round(float(match.group(1)) * UNITS[match.group(2).lower()])
        shown = repr(value)
    elif isinstance(value, str):
        return None, f"must be {_WANTED}, not {value!r}"
    else:
        return None, f"must be {_WANTED}, not {kind_of(value)} ({value!r})"
    if nbytes is None or nbytes > MAX_SIZE:
        return None, f"must be at most {size_text(MAX_SIZE)}, not {shown}"
    return nbytes, None


def size_text(nbytes: int) -> str:
    """A size as the config file writes it, exactly: ``"20GiB"``, ``"500MB"``, ``"1234B"``."""
    for unit in _SHOWN:
        scale = UNITS[unit.lower()]
        if nbytes and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B"
