"""Line-level knowledge of a TOML file that ``tomllib`` does not give.

Two needs: point a problem at the line the user wrote (tomllib only reports lines for
syntax errors), and change one value without rewriting the user's file, so comments and
layout survive when the app remembers, say, the chosen theme. The scanner is deliberately
small: it understands table headers, dotted keys and multi-line strings, which is all a
config file uses. Every edit is checked by re-parsing (see ``files.update_config``), so a
layout it does not understand falls back to a full rewrite instead of a wrong file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import tomli_w

_HEADER = re.compile(r"^\s*\[\[?\s*(?P<name>[^\]]+?)\s*\]\]?\s*(#.*)?$")
_SIMPLE_KEY = r"""(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')"""
_KEY = re.compile(rf"^\s*(?P<key>{_SIMPLE_KEY}(?:\s*\.\s*{_SIMPLE_KEY})*)\s*=")
_PART = re.compile(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""")


@dataclass(frozen=True)
class _Line:
    number: int
    """1-based line number."""
    table: tuple[str, ...]
    """The table this line belongs to."""
    path: tuple[str, ...] | None
    """Full dotted path of the key set on this line, or None for other lines."""
    is_header: bool


def _split_dotted(text: str) -> tuple[str, ...]:
    return tuple(part.strip("\"'") for part in _PART.findall(text))


def _scan(text: str) -> Iterator[_Line]:
    table: tuple[str, ...] = ()
    in_multiline: str | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if in_multiline:
            if line.count(in_multiline) % 2 == 1:
                in_multiline = None
            continue
        header = _HEADER.match(line)
        if header and "=" not in line.split("]")[0]:
            table = _split_dotted(header.group("name"))
            yield _Line(number, table, None, True)
            continue
        key = _KEY.match(line)
        path = table + _split_dotted(key.group("key")) if key else None
        yield _Line(number, table, path, False)
        for quote in ('"""', "'''"):
            if line.count(quote) % 2 == 1:
                in_multiline = quote
                break


def find_key_line(text: str, path: tuple[str, ...]) -> int | None:
    """The line where ``path`` (e.g. ``("sampling", "top_k")``) is set, as best known.

    Falls back to the line of an enclosing inline table, then to the table header, so a
    problem always points somewhere useful; None when nothing matches.
    """
    best: tuple[int, int] | None = None  # (matched depth, line)
    for line in _scan(text):
        candidate = line.path if line.path is not None else (line.table if line.is_header else None)
        if candidate is None:
            continue
        if candidate == path:
            return line.number
        if path[: len(candidate)] == candidate and candidate:
            if best is None or len(candidate) > best[0]:
                best = (len(candidate), line.number)
    return best[1] if best else None


def render_value(value: Any) -> str:
    """``value`` as TOML source, e.g. ``"nord"`` or ``[1, 2]``."""
    return tomli_w.dumps({"v": value}).split("=", 1)[1].strip()


def _render(key: str, value: Any) -> str:
    return tomli_w.dumps({key: value}).rstrip("\n")


def set_value(text: str, path: tuple[str, ...], value: Any) -> str:
    """Return ``text`` with ``path`` set to ``value``, or removed when ``value`` is None.

    Replaces the key's own line when it is a one-line assignment, otherwise adds the key
    at the end of its table (creating the table at the end of the file if needed).
    """
    lines = text.splitlines()
    table, key = path[:-1], path[-1]
    scanned = list(_scan(text))
    for line in scanned:
        if line.path == path:
            if value is None:
                del lines[line.number - 1]
            else:
                found = _KEY.match(lines[line.number - 1])
                assert found is not None  # _scan reports only lines that set a key
                written = found.group(0)  # indent, key and "="
                lines[line.number - 1] = f"{written} {render_value(value)}"
            return "\n".join(lines) + "\n"
    if value is None:
        return text
    rendered = _render(key, value)
    section = [line for line in scanned if line.table == table]
    headers = [line for line in section if line.is_header]
    if table and not headers:
        tail = "\n" if lines and lines[-1].strip() else ""
        block = f"{tail}[{'.'.join(_quote(part) for part in table)}]\n{rendered}\n"
        return "\n".join(lines) + ("\n" if lines else "") + block
    start = headers[0].number if table else 0
    end = None
    next_header = None
    for line in scanned:
        if line.number <= start:
            continue
        if line.is_header:
            next_header = line.number
            break
        if line.path is not None:
            end = line.number
    if end is None:
        end = start
        if not table and next_header is not None:
            # After the file's opening comments, before the comments of the first table.
            end = next_header - 1
            while end > 0 and lines[end - 1].lstrip().startswith("#"):
                end -= 1
            rendered += "\n" if end > 0 and not lines[end - 1].strip() else ""
    lines.insert(end, rendered)
    return "\n".join(lines) + "\n"


def _quote(part: str) -> str:
    return part if re.fullmatch(r"[A-Za-z0-9_-]+", part) else '"' + part.replace('"', '\\"') + '"'
