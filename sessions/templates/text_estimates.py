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
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from itertools import chain, islice
from string import Formatter
from typing import Any

from jinja2.runtime import Namespace

MAX_TEXT_CHARS = 16 * 1024 * 1024
"""Largest single value, and largest total output, one render may produce (characters)."""

_NUMBER = re.compile(rb"\d+")
_SIZED = (str, bytes, list, tuple, set, frozenset, dict, range)
MAX_JOIN_ITEMS = 1 << 20
"""Most items a join may take from an iterator (it is read into a list to be estimated)."""
_WALK_ITEMS = 100_000  # values looked at for digits before assuming the worst


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


def _digit_run(value: Any, seen: list[int]) -> int:
    """Longest run of digits ``value`` (or anything inside it) could put into a format spec."""
    seen[0] += 1
    if seen[0] > _WALK_ITEMS:
        return 10
    if isinstance(value, (str, bytes)):
        raw = value.encode("utf-8", "replace") if isinstance(value, str) else value
        return max(map(len, _NUMBER.findall(raw)), default=0)
    if isinstance(value, int):
        return len(str(abs(value))) if value.bit_length() < 40 else 10
    if isinstance(value, Namespace):
        value = getattr(value, "_Namespace__attrs", {})
    if isinstance(value, Mapping):
        value = chain.from_iterable(value.items())
    elif not isinstance(value, (list, tuple, set, frozenset)):
        return 0
    return max((_digit_run(item, seen) for item in value), default=0)


def _nested_width(fmt: str, values: list[Any]) -> int:
    """The widest number ``{:{}}``-style nested fields could splice into a spec.

    A nested field puts an argument's text (``'200000000'``) into the width or precision,
    and several side by side concatenate their digits, so the bound is ten to the power of
    every digit they could bring; it stays small unless an argument holds long numbers.
    """
    nested = sum(spec.count("{") for _, _, spec, _ in Formatter().parse(fmt) if spec)
    if not nested:
        return 0
    run = max((_digit_run(value, [0]) for value in values), default=0)
    return 10 ** min(nested * run, 9)


def format_estimate(fmt: str | bytes, field_mark: str, values: list[Any]) -> int:
    """``%``-style or ``{}``-style formatting: every field may hold the widest value.

    Widths count whether written in the format (``{:99}``), passed as ``*`` arguments, or
    spliced in by nested fields (``'{:{}}'.format(x, '200000000')``).
    """
    raw = fmt.encode("utf-8", "replace") if isinstance(fmt, str) else fmt
    widest = max((10**9 if len(n) > 9 else int(n) for n in _NUMBER.findall(raw)), default=0)
    widest = max([widest, *map(_int, values)])
    if field_mark == "{" and isinstance(fmt, str):
        widest = max(widest, _nested_width(fmt, values))
    biggest = max(map(text_size, values), default=0)
    return len(raw) + raw.count(field_mark.encode()) * (biggest + widest)


def bounded_items(items: Any) -> Any:
    """An iterator read into a list, so that a join can be estimated before it runs.

    Anything with a length is returned as it is. Raises ``ValueError`` past
    ``MAX_JOIN_ITEMS`` items: no chat template joins a million pieces.
    """
    if not isinstance(items, Iterator):
        return items
    taken = list(islice(items, MAX_JOIN_ITEMS + 1))
    if len(taken) > MAX_JOIN_ITEMS:
        raise ValueError(f"a join of more than {MAX_JOIN_ITEMS:,} items")
    return taken


def join_estimate(items: Any, separator: Any = "") -> int:
    """Every item, plus the separator once per item (what a long separator multiplies)."""
    if not hasattr(items, "__len__"):
        return MAX_TEXT_CHARS + 1  # an unread iterator: callers pass ``bounded_items`` first
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


def _json_size(value: Any, depth: int, step: int, gap: int, limit: int) -> int:
    """JSON text for ``value`` nested ``depth`` deep: each item on its own indented line."""
    if depth > 1000 or limit < 0:
        return limit + 1
    if isinstance(value, Namespace):
        value = getattr(value, "_Namespace__attrs", {})
    if isinstance(value, Mapping):
        items: Any = value.items()
    elif isinstance(value, (list, tuple)):
        items = ((None, item) for item in value)
    else:
        return text_size(value, limit) * 6 + 2  # every character may become ``\uXXXX``
    total = 2 + depth * step
    for key, item in items:
        total += gap + (depth + 1) * step + (0 if key is None else text_size(key) * 6 + 2 + gap)
        total += _json_size(item, depth + 1, step, gap, limit - total)
        if total > limit:
            break
    return total


def tojson_estimate(value: Any, ensure_ascii: Any = False, indent: Any = None,
                    separators: Any = None, *_: Any, **__: Any) -> int:
    """Indentation repeats on every line, ``indent`` times the depth of the line."""
    step = len(indent) if isinstance(indent, str) else _int(indent)
    gap = max(map(text_size, separators), default=0) if isinstance(separators, (list, tuple)) \
        else 2
    return _json_size(value, 0, step + 1, max(gap, 2), MAX_TEXT_CHARS + 1)


_LINE_BREAKS = ("\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")


def _pieces(s: Any, separator: Any = None, maxsplit: Any = -1) -> int:
    """How many pieces splitting ``s`` gives at most (``str.split`` and ``rsplit``)."""
    if isinstance(s, str) and isinstance(separator, str) and separator:
        pieces = s.count(separator) + 1
    elif isinstance(s, bytes) and isinstance(separator, bytes) and separator:
        pieces = s.count(separator) + 1
    else:
        pieces = (text_size(s) + 1) // 2 + 1  # words need a gap between them
    limit = _int(maxsplit)
    return min(pieces, limit + 1) if limit >= 0 and isinstance(maxsplit, int) else pieces


def split_estimate(s: Any, sep: Any = None, maxsplit: Any = -1) -> int:
    """A list of pieces costs two characters each on top of their text (see ``text_size``):
    a string of one character repeated sixteen million times splits into as many pieces."""
    return text_size(s) + 2 * _pieces(s, sep, maxsplit) + 2


def splitlines_estimate(s: Any, keepends: Any = False) -> int:
    lines = 1 + (sum(map(s.count, _LINE_BREAKS)) if isinstance(s, str) else text_size(s))
    return text_size(s) + 2 * lines + 2


def list_estimate(value: Any, *_: Any, **__: Any) -> int:
    """A string becomes a list of its characters, each costing three (see ``text_size``)."""
    return 3 * len(value) + 2 if isinstance(value, (str, bytes)) else text_size(value)


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
    "join": lambda value, d="", attribute=None: join_estimate(value, d),
    "replace": replace_estimate,
    "format": _format_filter,
    "center": pad_estimate,
    "indent": indent_estimate,
    "wordwrap": wordwrap_estimate,
    "tojson": tojson_estimate,
    "batch": fill_estimate,
    "slice": fill_estimate,
    "string": _scaled(1),
    "list": list_estimate,
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
    "split": split_estimate,
    "rsplit": split_estimate,
    "splitlines": splitlines_estimate,
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
