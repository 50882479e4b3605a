"""How far a download has got: each step is handed to a callback, so the command line
can draw its own line on stderr and the app its own bar."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sessions.units import human_size


@dataclass(frozen=True)
class DownloadProgress:
    """One step of a download: the file, the bytes on disk, the total and the rate."""

    file: str
    done: int
    """Bytes of this file on disk, those resumed included."""
    total: int | None
    rate: float
    """Bytes per second fetched by this run (resumed bytes are not counted)."""
    part: int = 1
    parts: int = 1
    """The file's place among the files fetched (the parts of a split model)."""
    finished: bool = False


ProgressCallback = Callable[[DownloadProgress], None]


def progress_text(step: DownloadProgress) -> str:
    """``name (part 1 of 2): 12.3 MB of 241.4 MB (5%), 8.1 MB/s``, for the terminal and the app."""
    part = f" (part {step.part} of {step.parts})" if step.parts > 1 else ""
    if step.total:
        share = f"{human_size(step.done)} of {human_size(step.total)} ({100 * step.done // step.total}%)"
    else:
        share = human_size(step.done)
    return f"{step.file}{part}: {share}, {human_size(int(step.rate))}/s"
