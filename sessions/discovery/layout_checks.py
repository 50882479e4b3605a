"""What the last load of each model file found about its saved states.

Whether llamachat can read a model's saved states is known only once the model is loaded
(``sessions.llama.layout_check`` decodes a few tokens and parses them back), while the
model list reads headers alone. So every load records its finding here, and
``llamachat models`` shows a model that ran without checkpoints as such.

A file is named by its real path, size and modification time: a file replaced since its
last load reads as not checked. The record is a cache: a missing, unreadable or foreign
file reads as empty, two processes recording at once may lose one finding (the next load
records it again), and nothing else depends on it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from sessions import paths
from sessions.bounded_read import read_regular_file
from sessions.durable import write_atomically

RECORD_NAME = "layout-checks.json"
MAX_ENTRIES = 256
"""Files remembered; the findings of the longest-unloaded go first."""
MAX_BYTES = 1 << 20
"""A record larger than this is not one llamachat wrote: it reads as empty."""


def record_file() -> Path:
    return paths.cache_dir() / RECORD_NAME


def file_key(path: Path | str) -> str | None:
    """The real path, size and modification time of ``path``; None when it cannot be read."""
    try:
        real = Path(path).resolve()
        info = real.stat()
    except (OSError, RuntimeError):  # RuntimeError: a link loop, before Python 3.13
        return None
    return f"{real}|{info.st_size}|{info.st_mtime_ns}"


def record_check(path: Path | str, problem: str | None) -> None:
    """Remember what loading ``path`` found: ``problem`` is why its states cannot be
    checkpointed, None when they can. A record that cannot be written is left as it is."""
    key = file_key(path)
    if key is None:
        return
    entries = _read()
    entries.pop(key, None)
    entries[key] = {"problem": problem, "checked": time.time()}
    kept = dict(list(entries.items())[-MAX_ENTRIES:])  # insertion order: the latest loads last
    try:
        record_file().parent.mkdir(parents=True, exist_ok=True)
        write_atomically(record_file(), json.dumps(kept, ensure_ascii=False), sync=False)
    except OSError:
        pass  # a cache: the next load tries again


def checkpoint_problem(path: Path | str, problems: dict[str, str] | None = None) -> str | None:
    """Why the last load of this very file ran it without checkpoints (None: it had them,
    or it was never loaded as it is now). ``problems``: ``recorded_problems()``, read once
    for a whole list of files."""
    key = file_key(path)
    if key is None:
        return None
    return (recorded_problems() if problems is None else problems).get(key)


def recorded_problems() -> dict[str, str]:
    """Every recorded problem, by file key."""
    found: dict[str, str] = {}
    for key, entry in _read().items():
        problem = entry.get("problem") if isinstance(entry, dict) else None
        if isinstance(problem, str):
            found[key] = problem
    return found


def _read() -> dict[str, object]:
    try:
        data = json.loads(read_regular_file(record_file(), MAX_BYTES))
    except (OSError, ValueError):  # missing, not a file, too large, not JSON
        return {}
    return data if isinstance(data, dict) else {}


__all__ = ["checkpoint_problem", "file_key", "record_check", "record_file", "recorded_problems"]
