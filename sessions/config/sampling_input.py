"""Sampling settings typed by a person (the app's settings dialog, ``ask``'s flags).

The same rules as the ``[sampling]`` table of ``config.toml`` apply, from the same table
(``validate.TABLES``), so a value refused in the file is refused in the dialog and on the
command line too, with the same words.
"""

from __future__ import annotations

from sessions.config.validate import TABLES, Rule, check_value
from sessions.errors import LlamachatError

SAMPLING_RULES: dict[str, Rule] = TABLES["sampling"][1]

LABELS: dict[str, str] = {
    "temperature": "temperature",
    "top_k": "top-k",
    "top_p": "top-p",
    "min_p": "min-p",
    "repeat_penalty": "repeat penalty",
    "repeat_last_n": "repeat window",
    "seed": "seed",
    "max_tokens": "max tokens",
}
"""How each setting is named to a person."""


class SamplingValueError(LlamachatError, ValueError):
    """A typed value that is not allowed; the message is one sentence."""


def parse_sampling_value(name: str, text: str) -> int | float:
    """The value of setting ``name`` written as ``text`` (``"0.7"``, ``"40"``)."""
    rule = SAMPLING_RULES[name]
    label = LABELS.get(name, name)
    cleaned = text.strip()
    try:
        value: int | float = int(cleaned) if rule.kind == "int" else float(cleaned)
    except ValueError:
        wanted = "a whole number" if rule.kind == "int" else "a number"
        raise SamplingValueError(f"{label} must be {wanted}, not {cleaned!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise SamplingValueError(f"{label} must be a number, not {cleaned!r}")
    checked, reason = check_value(rule, value)
    if reason:
        raise SamplingValueError(f"{label} {reason}")
    return checked
