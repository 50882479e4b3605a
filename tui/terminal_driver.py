"""Textual's Linux/macOS driver, made safe for a terminal that goes away.

When a terminal window closes, the kernel hangs up its processes: SIGHUP, then SIGCONT.
Two things in Textual's ``LinuxDriver`` (8.2) can then keep ``llamachat`` from ever
ending, with its database lock held:

- Its output thread dies at the first write that fails (``EIO`` on a hung-up terminal),
  and writes go on piling into its queue of 30. Once that is full, the next write, or
  the ``None`` that stops the thread at shutdown, waits forever.
- Its SIGCONT handler starts application mode again, meant for coming back from Ctrl+Z,
  but it runs on any SIGCONT: on a hang-up that starts a second output thread, which is
  the one that then dies as above (seen as a hung test: the app's main thread waiting to
  stop a dead thread, the first output thread idle).

So output goes through ``TerminalOutput``, which drops what cannot be written once the
terminal is gone, and a SIGCONT resumes application mode only after this driver
suspended it (Ctrl+Z).

Its size comes from the terminal itself: Textual asks ``shutil.get_terminal_size``, which
prefers ``COLUMNS`` and ``LINES`` from the environment, and a shell that exported them at
one size left the app at that size after every resize (seen in tmux: 140 columns, then
80, then 50, drawn at 80).
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any

from textual.drivers.linux_driver import LinuxDriver


class TerminalOutput:
    """A text stream that stops writing, silently, once a write to the terminal fails.

    A terminal that refused a write is gone (hung up, or its pipe closed): nothing more
    can be shown on it, and the app is about to be told so by a signal.
    """

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                self._stream.write(text)
            except (OSError, ValueError):  # EIO, EPIPE; ValueError: the stream was closed
                self.gone = True
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self.gone = True

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding...
        return getattr(self._stream, name)


class TerminalDriver(LinuxDriver):
    """``LinuxDriver`` with output that survives a hang-up and SIGCONT only after Ctrl+Z."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self._file is not None:  # None: Python was started without a stderr
            self._file = TerminalOutput(self._file)  # type: ignore[assignment]
        self._suspended = False

    def _get_terminal_size(self) -> tuple[int, int]:
        """The size the terminal the app draws on reports, else Textual's guess."""
        for stream in (self._file, sys.__stdin__):
            try:
                size = os.get_terminal_size(stream.fileno())  # type: ignore[union-attr]
            except (AttributeError, ValueError, OSError):
                continue
            if size.columns and size.lines:
                return size.columns, size.lines
        return super()._get_terminal_size()

    def _sigtstp_application(self, *args: Any) -> None:
        self._suspended = True
        super()._sigtstp_application(*args)

    def _sigcont_application(self, *args: Any) -> None:
        if self._suspended:  # back from Ctrl+Z: application mode was stopped, start it again
            self._suspended = False
            super()._sigcont_application(*args)
