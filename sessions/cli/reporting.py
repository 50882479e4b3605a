"""Every known failure turned into one line on stderr and an exit status.

Users meet ``llamachat`` in scripts and terminals, where a traceback is noise: every
error of the project (``LlamachatError``, the one root) carries a message written for them. The subcommands
and the app's start (run by the entry point, ``tui.entry``) end the same way.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import TextIO, TypeVar

from sessions.cli.context import tell
from sessions.cli.interrupts import silence_stdout
from sessions.cli.parser import PROG
from sessions.errors import LlamachatError
from sessions.text_safety import inert


def error_line(err: TextIO, message: str) -> int:
    """``llamachat: error: MESSAGE`` on stderr; exit status 1."""
    tell(err, f"{PROG}: error: {inert(message)}")
    return 1


def _stopped(err: TextIO, signum: int, command: str | None) -> int:
    """One line saying what a signal cut short (after the ``^C`` a terminal echoes, on a
    line of its own); the status a shell reports for it, 128 + the signal."""
    isatty = getattr(err, "isatty", None)
    start = "\n" if isatty is not None and isatty() else ""
    doing = f"`{PROG} {command}`" if command else "the app's start"
    tell(err, f"{start}{PROG}: stopped by {signal.Signals(signum).name} before {doing} finished")
    return 128 + signum


Done = TypeVar("Done")


def reported(work: Callable[[], Done], err: TextIO, command: str | None) -> Done | int:
    """Run ``work`` (a subcommand, or the app's start when ``command`` is None): what it
    returns, or the exit status of the one line its failure is told in."""
    try:
        return work()
    except BrokenPipeError:  # `llamachat sessions | head`: the reader left early
        silence_stdout()
        return 0
    except KeyboardInterrupt as stop:  # Ctrl+C, or a StopSignal (``interrupts.signals_raise``)
        return _stopped(err, getattr(stop, "signum", signal.SIGINT), command)
    except Exception as error:
        if isinstance(error, OSError):  # the file, and what is wrong with it (a LlamachatError too)
            where = f"{error.filename}: " if error.filename else ""
            return error_line(err, f"{where}{error.strerror or error}")
        if isinstance(error, LlamachatError):
            return error_line(err, str(error))
        if os.environ.get("LLAMACHAT_DEBUG"):  # a bug: still one line, unless asked
            raise
        return error_line(err, f"unexpected {type(error).__name__}: {error} "
                               "(run with LLAMACHAT_DEBUG=1 to see where)")
