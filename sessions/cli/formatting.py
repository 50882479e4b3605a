"""Small text helpers shared by the subcommands' plain-text output."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from sessions.text_safety import one_line as flat_line


def local_time(seconds: float) -> str:
    """``2024-05-01 14:03`` in the local time zone."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds))


def iso_time(seconds: float) -> str:
    """ISO 8601 with the UTC offset, for JSON output."""
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="seconds")


TITLE_WIDTH = 120
"""Characters of a title printed on a line (``--json`` gives it whole)."""


def one_line(text: str, width: int = 60) -> str:
    """The text on one line (whitespace runs collapsed), cut to ``width`` with an ellipsis."""
    flat = flat_line(text[: 4 * width + 64])  # the rest is cut anyway: a 5 MB title costs nothing
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def title_text(title: str) -> str:
    """A session title for a line of output: titles come from imported files too, so one
    holding a newline must not print a line of its own (see ``text_safety.one_line``), and
    one of megabytes is cut to ``TITLE_WIDTH`` characters."""
    return one_line(title, TITLE_WIDTH) or "(untitled)"


def table(rows: list[list[str]]) -> list[str]:
    """Left-aligned columns separated by two spaces; the last column is not padded.

    Every cell is put on one line first: a cell holding a newline (a title or a model name
    from a stranger's file) would otherwise print a row of its own that looks real.
    """
    if not rows:
        return []
    rows = [[flat_line(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join([cell.ljust(w) for cell, w in zip(row, widths, strict=False)] + [row[-1]]).rstrip()
            for row in rows]
