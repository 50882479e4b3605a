"""The progress of a download by name (``-hf``, ``pull``) on stderr.

On a terminal one line is redrawn in place a few times a second; elsewhere (a log, a
pipe) each file gets one line when it starts and one when it is done, so a log file does
not fill with carriage returns.
"""

from __future__ import annotations

import time
from typing import TextIO

from sessions.api.models import DownloadProgress, progress_text
from sessions.cli.context import tell
from sessions.text_safety import inert

REDRAW_EVERY = 0.2
"""Seconds between two redraws of the line on a terminal."""


class DownloadLine:
    """A ``ProgressCallback`` that writes to ``err``."""

    def __init__(self, err: TextIO | None) -> None:
        self._err = err
        isatty = getattr(err, "isatty", None)
        self._tty = bool(isatty is not None and isatty())
        self._drawn = 0.0
        self._started: set[tuple[str, int]] = set()

    def __call__(self, step: DownloadProgress) -> None:
        text = inert(progress_text(step))
        key = (step.file, step.part)
        if not self._tty:
            if key not in self._started:
                self._started.add(key)
                tell(self._err, f"llamachat: fetching {text}")
            elif step.finished:
                tell(self._err, f"llamachat: fetched {text}")
            return
        now = time.monotonic()
        if not step.finished and now - self._drawn < REDRAW_EVERY:
            return
        self._drawn = now
        try:
            assert self._err is not None  # a tty
            self._err.write(f"\r\x1b[2Kllamachat: {text}" + ("\n" if step.finished else ""))
            self._err.flush()
        except (OSError, ValueError):
            self._tty = False
