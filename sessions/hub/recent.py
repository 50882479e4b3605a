"""The models fetched by name lately, so the model picker can list them first.

A small JSON list in the data folder, newest first; a missing or damaged file is an
empty list (the downloads themselves stay in the Hugging Face cache either way).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from sessions import paths
from sessions.bounded_read import read_regular_file
from sessions.durable import write_atomically

FILE_NAME = "recent_downloads.json"
KEPT = 20
"""Entries kept; older ones are forgotten, not deleted from the cache."""
LIMIT = 1 << 20
"""Bytes of the list read: twenty entries take a few KB."""


@dataclass(frozen=True)
class RecentDownload:
    """A model fetched by name: the file it opens from and the name it was asked by."""

    path: Path
    name: str
    """``user/repo:QUANT``."""
    at: float


def recent_file() -> Path:
    return paths.data_dir() / FILE_NAME


def recent_downloads() -> list[RecentDownload]:
    """The models fetched lately, newest first."""
    try:
        entries = json.loads(read_regular_file(recent_file(), LIMIT))  # a FIFO there must not block
    except (OSError, ValueError):
        return []
    found = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("path"), str) and isinstance(entry.get("name"), str):
            at = entry.get("at")
            when = float(at) if isinstance(at, int | float) else 0.0
            found.append(RecentDownload(Path(entry["path"]), entry["name"], when))
    return found


def remember_download(path: Path, name: str) -> None:
    """Put ``path`` first in the list (once). A list that cannot be written is skipped:
    the model was fetched, and that is what matters."""
    kept = [entry for entry in recent_downloads() if entry.path != path][: KEPT - 1]
    entries = [{"path": str(path), "name": name, "at": time.time()}]
    entries += [{"path": str(entry.path), "name": entry.name, "at": entry.at} for entry in kept]
    try:
        paths.ensure_private_dir(recent_file().parent)
        write_atomically(recent_file(), json.dumps(entries, indent=1))
    except OSError:
        pass
