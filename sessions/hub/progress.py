"""How far a download has got, reported from huggingface_hub's progress bars.

``hf_hub_download`` takes a ``tqdm_class`` and makes one bar per file. ``bar_class``
builds a class that draws nothing and hands each step to a callback instead, so the
command line can draw its own line on stderr and the app its own bar.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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


def bar_class(report: ProgressCallback, file: str, part: int = 1, parts: int = 1) -> type:
    """A ``tqdm_class`` for ``hf_hub_download`` that reports to ``report``.

    It mimics the part of tqdm that huggingface_hub uses (``update``, ``close``, the
    context manager, ``total`` and ``n``). ``update_transfer`` exists so that a Xet
    download drives one bar, not two, and counts nothing: the bytes on disk are counted
    by ``update``.
    """

    class ReportingBar:
        def __init__(self, *_args: Any, total: int | None = None, initial: int = 0, **_kwargs: Any) -> None:
            self.total = total
            self.n = initial
            self._initial = initial
            self._started = time.monotonic()
            self._report(finished=False)

        def _report(self, *, finished: bool) -> None:
            elapsed = time.monotonic() - self._started
            rate = (self.n - self._initial) / elapsed if elapsed > 0 else 0.0
            report(DownloadProgress(file, self.n, self.total, rate, part, parts, finished))

        def update(self, n: int | float | None = 1) -> None:
            self.n += int(n or 0)
            self._report(finished=False)

        def update_transfer(self, _n: int) -> None:
            """Network bytes of a Xet download; the bytes on disk are what is shown."""

        def set_postfix_str(self, *_args: Any, **_kwargs: Any) -> None:
            """The rate is worked out here; tqdm's text is not used."""

        def refresh(self, *_args: Any, **_kwargs: Any) -> None:
            """Nothing is drawn here."""

        def close(self) -> None:
            self._report(finished=True)

        def __enter__(self) -> ReportingBar:
            return self

        def __exit__(self, error_type: object, *_rest: object) -> None:
            if error_type is None:
                self.close()

    return ReportingBar


def progress_text(step: DownloadProgress) -> str:
    """``name (part 1 of 2): 12.3 MB of 241.4 MB (5%), 8.1 MB/s``, for the terminal and the app."""
    part = f" (part {step.part} of {step.parts})" if step.parts > 1 else ""
    if step.total:
        share = f"{human_size(step.done)} of {human_size(step.total)} ({100 * step.done // step.total}%)"
    else:
        share = human_size(step.done)
    return f"{step.file}{part}: {share}, {human_size(int(step.rate))}/s"
