"""Output to a terminal that went away: dropped, never a hang (``tui.terminal_driver``).

Textual's output thread dies at the first write a hung-up terminal refuses, and once its
queue of 30 is full every later write, and the stop at shutdown, waits forever. Here the
terminal is a real pseudo-terminal whose other end is closed, as when a window closes.
"""

from __future__ import annotations

import contextlib
import os
import threading

from textual.drivers._writer_thread import WriterThread

from tui.app import LlamaChatApp
from tui.terminal_driver import TerminalDriver, TerminalOutput


def hung_up_terminal():
    """The app's end of a pseudo-terminal whose window is gone (writes fail with EIO)."""
    window, app_end = os.openpty()
    os.close(window)
    return os.fdopen(app_end, "w", buffering=1)


def test_writes_to_a_hung_up_terminal_are_dropped_and_the_writer_stops():
    stream = hung_up_terminal()
    try:
        output = TerminalOutput(stream)
        writer = WriterThread(output)  # type: ignore[arg-type]
        writer.start()
        done = threading.Event()

        def write_then_stop() -> None:  # a shutdown after a screenful of updates
            for frame in range(100):
                writer.write(f"\x1b[H frame {frame}\n")
            writer.stop()
            done.set()

        threading.Thread(target=write_then_stop, daemon=True).start()
        assert done.wait(30), "the output thread's queue filled up: a write or the stop waits forever"
        assert output.gone and not writer.is_alive()
        assert output.write("more") == 4  # still accepted, and dropped
        output.flush()
    finally:
        with contextlib.suppress(OSError):  # what is left in its buffer cannot be written either
            stream.close()


def test_output_to_a_live_terminal_passes_through():
    window, app_end = os.openpty()
    with os.fdopen(app_end, "w", buffering=1) as stream:
        output = TerminalOutput(stream)
        output.write("hello\n")
        output.flush()
        assert os.read(window, 100).replace(b"\r", b"") == b"hello\n"
        assert not output.gone and output.fileno() == app_end  # the rest is the stream's
    os.close(window)


def test_the_app_uses_the_driver_on_linux_and_macos():
    assert issubclass(LlamaChatApp.get_driver_class(object.__new__(LlamaChatApp)), TerminalDriver)


def test_the_size_is_the_terminals_not_the_environments(monkeypatch):
    """A shell that exported COLUMNS and LINES at one size: Textual's own driver kept that
    size through every resize."""
    import fcntl
    import struct
    import termios

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("LINES", "24")
    window, app_end = os.openpty()
    fcntl.ioctl(app_end, termios.TIOCSWINSZ, struct.pack("HHHH", 16, 50, 0, 0))
    with os.fdopen(app_end, "w", buffering=1) as stream:
        driver = object.__new__(TerminalDriver)
        driver._file = TerminalOutput(stream)  # type: ignore[assignment]
        assert driver._get_terminal_size() == (50, 16)
        fcntl.ioctl(app_end, termios.TIOCSWINSZ, struct.pack("HHHH", 42, 140, 0, 0))  # resized
        assert driver._get_terminal_size() == (140, 42)
    os.close(window)
