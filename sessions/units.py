"""Sizes and counts in the words a user reads (``1.5 GB``, ``260K``), for the CLI and the app alike."""

from __future__ import annotations


def human_size(size: int) -> str:
    """Decimal units, as download pages and file managers show model sizes."""
    if size < 1000:
        return f"{size} B"
    value = float(size)
    for unit in ("KB", "MB", "GB", "TB"):
        value /= 1000
        if round(value, 1) < 1000 or unit == "TB":  # 999,999 bytes read "1.0 MB", not "1000.0 KB"
            break
    return f"{value:.1f} {unit}"


def sizes_apart(size: int, limit: int) -> tuple[str, str]:
    """``size`` and ``limit`` in words that tell them apart: ``human_size`` when it does,
    exact bytes when it rounds both alike (2,000,001 bytes is "2.0 MB", as is the limit)."""
    shown, most = human_size(size), human_size(limit)
    if shown != most:
        return shown, most
    return f"{size:,} bytes", f"{limit:,} bytes"


def human_count(count: int | None) -> str:
    """Parameter counts the way model names write them: 260K, 1.5B."""
    if not count:
        return "?"
    for limit, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if count >= limit:
            value = count / limit
            return f"{value:.1f}{suffix}" if value < 10 else f"{value:.0f}{suffix}"
    return str(count)
