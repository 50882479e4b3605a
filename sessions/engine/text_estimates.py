"""Upper bounds on how much text a template operation is about to build.

The bounded sandbox asks these *before* an operation runs: a Python string of a billion
characters is allocated (and often filled) in one call, so checking the result afterwards
would be too late. Each estimate is deliberately generous: real chat templates build a few
kilobytes per message and stay far below every limit, while the hostile cases (a width of a
billion, ``'x' * 10**9``, a join that repeats a megabyte a million times) are orders of
magnitude above it. Bad arguments make an estimate raise ``TypeError`` or ``ValueError``;
the caller then lets the operation fail with its own message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import partial
from itertools import chain
from typing import Any

from jinja2.runtime import Namespace

MAX_TEXT_CHARS = 16 * 1024 * 1024
"""Largest single value, and largest total output, one render may produce (characters)."""

_NUMBER = re.compile(rb"\d+")
_SIZED = (str, bytes, list, tuple, set, frozenset, dict, range)


def text_size(value: Any, limit: int = MAX_TEXT_CHARS + 1) -> int:
    """About how many characters ``str(value)`` takes; stops counting above ``limit``."""
    if isinstance(value, (str, bytes)):
        return len(value)
    if value is None or isinstance(value, (bool, float)):
        return 8
    if isinstance(value, int):
        return value.bit_length() * 3 // 10 + 2
    if isinstance(value, range):
        return len(value) * 8 + 2
    if isinstance(value, Namespace):
        value = getattr(value, "_Namespace__attrs", {})
    if isinstance(value, Mapping):
        items: Any = chain.from_iterable(value.items())
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = value
    else:
        return 16
    total = 2
    for item in items:
        total += text_size(item, limit - total) + 2
        if total > limit:
            break
    return total


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _values(args: Any) -> list[Any]:
    if isinstance(args, tuple):
        return list(args)
    if isinstance(args, Mapping):
        return list(args.values())
    return [args]


def format_estimate(fmt: str | bytes, field_mark: str, values: list[Any]) -> int:
    """``%``-style or ``{}``-style formatting: every field may hold the widest value."""
    raw = fmt.encode("utf-8", "replace") if isinstance(fmt, str) else fmt
    widest = max((10**9 if len(n) > 9 else int(n) for n in _NUMBER.findall(raw)), default=0)
    widest = max([widest, *map(_int, values)])
    biggest = max(map(text_size, values), default=0)
    return len(raw) + raw.count(field_mark.encode()) * (biggest + widest)


def join_estimate(items: Any, separator: Any = "") -> int:
    if not hasattr(items, "__len__"):
        return 0  # an iterator: each item it yields was charged when it was built
    content = text_size(items) if isinstance(items, _SIZED) else len(items) * 16
    return content + text_size(separator) * len(items)


def replace_estimate(s: Any, old: Any, new: Any, count: Any = None) -> int:
    size = text_size(s)
    if isinstance(s, str) and isinstance(old, str) and old:
        hits = s.count(old)
    elif isinstance(s, bytes) and isinstance(old, bytes) and old:
        hits = s.count(old)
    else:
        hits = size + 1
    if _int(count) > 0:
        hits = min(hits, _int(count))
    return size + hits * text_size(new)


def pad_estimate(s: Any, width: Any = 80, *_: Any, **__: Any) -> int:
    return max(text_size(s), _int(width))


def indent_estimate(s: Any, width: Any = 4, *_: Any, **__: Any) -> int:
    lines = s.count("\n") + 1 if isinstance(s, str) else text_size(s)
    step = len(width) if isinstance(width, str) else _int(width)
    return text_size(s) + lines * step


def wordwrap_estimate(s: Any, width: Any = 79, break_long_words: Any = True,
                      wrapstring: Any = None, *_: Any, **__: Any) -> int:
    return text_size(s) * (1 + (text_size(wrapstring) if wrapstring is not None else 1))


def tojson_estimate(value: Any, ensure_ascii: Any = False, indent: Any = None,
                    *_: Any, **__: Any) -> int:
    step = len(indent) if isinstance(indent, str) else _int(indent)
    return text_size(value) * (6 + 4 * step)


def fill_estimate(value: Any, count: Any, fill_with: Any = None) -> int:
    extra = 0 if fill_with is None else _int(count) * (text_size(fill_with) + 2)
    return text_size(value) + extra


def _scaled(factor: int) -> Callable[..., int]:
    return lambda value, *_, **__: text_size(value) * factor


def _format_filter(value: Any, *args: Any, **kwargs: Any) -> int:
    if not isinstance(value, str):
        return 0
    return format_estimate(value, "%", [*args, *kwargs.values()])


FILTER_ESTIMATES: dict[str, Callable[..., int]] = {
    "join": join_estimate,
    "replace": replace_estimate,
    "format": _format_filter,
    "center": pad_estimate,
    "indent": indent_estimate,
    "wordwrap": wordwrap_estimate,
    "tojson": tojson_estimate,
    "batch": fill_estimate,
    "slice": fill_estimate,
    "string": _scaled(1),
    "list": _scaled(1),
    "pprint": _scaled(2),
    "upper": _scaled(3),
    "title": _scaled(3),
    "capitalize": _scaled(3),
    "escape": _scaled(6),
    "e": _scaled(6),
    "forceescape": _scaled(6),
    "xmlattr": _scaled(6),
    "urlencode": _scaled(9),
}
"""Estimates for the filters that can build more text than they receive."""


STR_METHOD_ESTIMATES: dict[str, Callable[..., int]] = {
    "join": lambda separator, items: join_estimate(items, separator),
    "replace": replace_estimate,
    "center": pad_estimate,
    "ljust": pad_estimate,
    "rjust": pad_estimate,
    "zfill": pad_estimate,
    "expandtabs": lambda s, tabsize=8: len(s) + s.count("\t" if isinstance(s, str) else b"\t")
    * _int(tabsize),
    "format": lambda fmt, *args, **kwargs: format_estimate(fmt, "{", [*args, *kwargs.values()]),
    "format_map": lambda fmt, mapping: format_estimate(fmt, "{", _values(mapping)),
    "translate": lambda s, table: len(s) * max(map(text_size, _values(table)), default=1),
    "upper": _scaled(3),
    "title": _scaled(3),
    "capitalize": _scaled(3),
    "swapcase": _scaled(3),
    "casefold": _scaled(3),
    "encode": _scaled(4),
}
"""Estimates for the ``str`` and ``bytes`` methods that can build more text than they get."""


def bind_owner(estimate: Callable[..., int], owner: Any) -> Callable[..., int]:
    """The estimate of a bound method: the string it belongs to comes first."""
    return partial(estimate, owner)


def _mul(left: Any, right: Any) -> int:
    if isinstance(left, int) and isinstance(right, (str, bytes, list, tuple)):
        left, right = right, left
    if isinstance(left, (str, bytes, list, tuple)) and isinstance(right, int):
        return text_size(left) * max(_int(right), 0)
    return 0


def _add(left: Any, right: Any) -> int:
    if isinstance(left, (str, bytes, list, tuple)) and isinstance(right, type(left)):
        return text_size(left) + text_size(right)
    return 0


def _mod(left: Any, right: Any) -> int:
    if isinstance(left, (str, bytes)):
        return format_estimate(left, "%", _values(right))
    return 0


_BINOPS: dict[str, Callable[[Any, Any], int]] = {"*": _mul, "+": _add, "%": _mod}


def binop_estimate(operator: str) -> Callable[[Any, Any], int] | None:
    """The estimate for a binary operator, or None when it cannot grow text."""
    return _BINOPS.get(operator)
