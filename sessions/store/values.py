"""Values the database must never hold, refused in words before they get in.

A lone surrogate (from a JSON ``"\\ud800"`` escape or from command-line bytes that are not
UTF-8) cannot be encoded for SQLite, and a NaN or far-future time goes in but breaks every
later ``show`` and ``export``. Refusing them at the store's door, with a ``StoreError``
that names the value, keeps every caller (the app, ``ask``, the importers) honest.
"""

from __future__ import annotations

import math

from sessions.store.errors import InvalidValue

LATEST_TIME = 253402300799.0
"""9999-12-31 23:59:59 UTC: the last second ``datetime`` can show."""
ID_RANGE = range(-(2**63), 2**63)
"""What SQLite's INTEGER holds; an id outside it names nothing."""


def check_text(text: object, what: str = "message text") -> str:
    if not isinstance(text, str):
        raise InvalidValue(f"{what} must be a string, not {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InvalidValue(
            f"{what} is not valid Unicode text (character {error.start + 1} is half of a surrogate "
            "pair, or a byte that is not UTF-8); nothing was saved") from None
    return text


def check_time(value: float | None, what: str = "the time") -> float | None:
    """``value`` as a float, None kept; a NaN, infinite or out-of-range time is refused."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError, OverflowError):
        raise InvalidValue(f"{what} must be a number of seconds, not {value!r}") from None
    if not math.isfinite(seconds) or not 0.0 <= seconds <= LATEST_TIME:
        raise InvalidValue(f"{what} is not a valid time ({value!r}: expected seconds since 1970, "
                           "before the year 10000)")
    return seconds


def is_id(value: object) -> bool:
    """Whether ``value`` can name a row (a whole number SQLite can store)."""
    return isinstance(value, int) and not isinstance(value, bool) and value in ID_RANGE
