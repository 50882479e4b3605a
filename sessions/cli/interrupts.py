"""Ctrl+C, SIGTERM, SIGHUP or a reader gone while ``ask`` writes a reply: stop, keep, say so.

The app keeps a stopped reply (Esc) as a reply marked stopped; ``ask`` does the same
whatever stops it:

- SIGINT (Ctrl+C), SIGTERM and SIGHUP (the terminal closed) stop the reply at the next
  token; the text written so far is stored as a stopped reply (it can be continued with
  ``--continue``), one line on stderr says so, and the exit status is 128 + the signal
  (130, 143, 129), as a shell reports a command a signal ended.
- A reader that leaves early (``llamachat ask ... | head``) is the same gesture: nothing
  more is written to stdout, the reply stops there and is stored as stopped, one line on
  stderr says so, and the status is 141 (128 + SIGPIPE, what a shell reports for a
  writer whose reader left), so a script can tell a cut reply from a whole one.
- Any other failure of stdout (a terminal gone: EIO; a full disk: ENOSPC; no stdout at
  all, ``>&-``) stops and keeps the reply the same way; the line says that stdout failed
  and why, and the status is 1. A signal that comes too (a hang-up sends SIGHUP) wins
  the status.

A second signal ends the process at once, as if nothing was caught. For ``ask`` one is
enough: work that does not stop within ``STOP_GRACE`` seconds of it (a read that cannot
be interrupted, a model still loading) is left, and the process ends there with the
signal's status and one line saying so; what was saved before is kept, as after a kill.

The command's work runs in a thread of its own, with these signals blocked there (and in
every thread it starts, llama.cpp's included), so they always reach the main thread,
which only waits: its handler runs at once even while llama.cpp decodes, and stopping
uses the engine's abort flag, which interrupts a prompt in the middle of a batch.

``import`` and ``delete`` run the same way: a signal asks them to stop, and they roll
back unless their commit has begun. ``export -o`` writes in the main thread, where
``signals_raise`` lets SIGTERM and SIGHUP unwind it as Ctrl+C does.
"""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")
SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
SIGPIPE_STATUS = 128 + getattr(signal, "SIGPIPE", 13)
JOIN_STEP = 0.5
"""Seconds between two looks at the work thread (signals interrupt the wait anyway)."""
STOP_GRACE = 10.0
"""Seconds ``ask``'s work has to stop after a signal before the process ends without it."""


def silence_stdout() -> None:
    """Point stdout at /dev/null once its reader has gone: later writes, and the
    interpreter's final flush, cannot fail again."""
    _silence(sys.stdout)


def silence_stderr() -> None:
    """The same for stderr, once a remark could not be written to it (a terminal gone)."""
    _silence(sys.stderr)


def _silence(stream: Any) -> None:
    if stream is None:  # started without it: its descriptor may now be any file opened since
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):
        pass


class StopSignal(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl+C raises ``KeyboardInterrupt`` (see
    ``signals_raise``); ``signum`` says which, for the exit status."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def signals_raise() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise ``StopSignal`` as SIGINT raises
    ``KeyboardInterrupt``.

    Left to their default, they end the process on the spot: a file being written through
    ``sessions.durable`` then stays behind as a hidden ``.NAME.PID.RANDOM.tmp`` as large as
    the export, in the user's own folder, where nothing ever sweeps it. Raised, they unwind
    the block, whose ``finally`` clauses remove it. Outside the main thread, nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_stop(number: int, frame: FrameType | None) -> None:
        raise StopSignal(number)

    previous = {number: signal.signal(number, raise_stop) for number in SIGNALS if number != signal.SIGINT}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


class Interrupts:
    """What stopped the command, if anything, and the handlers that notice it."""

    def __init__(self, on_stop: Callable[[], None], *, grace: float | None = None) -> None:
        self._on_stop = on_stop
        self._grace = grace
        """Seconds the work has to stop after a signal (None: it is waited for)."""
        self._signalled_at: float | None = None
        self.signum: int | None = None
        """The first signal received."""
        self.reader_gone = False
        """stdout was closed by its reader."""
        self.output_failure: str | None = None
        """Why stdout could not be written, when it failed otherwise (in words)."""
        self._previous: dict[int, Any] = {}

    @property
    def happened(self) -> bool:
        return self.signum is not None or self.reader_gone or self.output_failure is not None

    @property
    def status(self) -> int:
        if self.signum is not None:
            return 128 + self.signum
        return SIGPIPE_STATUS if self.reader_gone else 1

    @property
    def cause(self) -> str:
        """What stopped the command, in words."""
        if self.signum is not None:
            return f"stopped by {signal.Signals(self.signum).name}"
        if self.reader_gone:
            return "stopped: the output was closed by its reader"
        return f"stopped: the reply could not be written to stdout ({self.output_failure})"

    def stop_requested(self) -> bool:
        return self.happened

    def reader_left(self) -> None:
        """stdout cannot be written any more: stop as a signal would (any thread)."""
        if not self.happened:
            self.reader_gone = True
            self._on_stop()

    def output_failed(self, why: str) -> None:
        """stdout failed otherwise (``why``, in words): stop as a signal would (any thread)."""
        if not self.happened:
            self.output_failure = why
            self._on_stop()

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for number in SIGNALS:
                self._previous[number] = signal.signal(number, self._received)
        return self

    def __exit__(self, *exc: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()

    def _received(self, number: int, frame: FrameType | None) -> None:
        if self.signum is not None:  # a second one: end now, as without a handler
            for each in SIGNALS:
                signal.signal(each, signal.SIG_DFL)
            os.kill(os.getpid(), number)
            return
        stopped = self.happened
        self.signum = number
        self._signalled_at = time.monotonic()
        if not stopped:
            self._on_stop()

    def run(self, work: Callable[[], T]) -> T:
        """Run ``work`` in a thread that never receives these signals; return its result
        (or raise its error) once it has finished."""
        outcome: list[Any] = []

        def target() -> None:
            if hasattr(signal, "pthread_sigmask"):
                signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
            try:
                outcome.append((True, work()))
            except BaseException as error:
                outcome.append((False, error))

        thread = threading.Thread(target=target, name="llamachat-work", daemon=True)
        thread.start()
        while thread.is_alive():
            thread.join(JOIN_STEP)
            if self._overdue() and thread.is_alive():
                self._end_without_it()
        finished, value = outcome[0]
        if not finished:
            raise value
        return value

    def _overdue(self) -> bool:
        return (self._grace is not None and self._signalled_at is not None
                and time.monotonic() - self._signalled_at > self._grace)

    def _end_without_it(self) -> None:
        """The work did not stop in time: say so and end, as the signal would have."""
        assert self.signum is not None
        name = signal.Signals(self.signum).name
        try:
            print(f"llamachat: stopped by {name}: what was running had not stopped {self._grace:g} s later, "
                  "so llamachat ended there (what was saved before is kept)", file=sys.stderr, flush=True)
        except (OSError, ValueError, AttributeError):
            pass
        os._exit(128 + self.signum)
