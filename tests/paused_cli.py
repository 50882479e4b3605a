"""The command line in a process of its own, paused at a chosen call, for tests that
signal it at exactly that moment (a random delay almost never lands in a commit).

``python -m tests.paused_cli MODULE:NAME before|after|exit ARG...`` replaces ``NAME`` in
``MODULE`` (``Class.method`` too) by a wrapper that, before or after the real call, or
once the context manager it returns has exited (a transaction, committed), writes
``PAUSED`` on stderr and waits for a line on stdin; then runs ``llamachat ARG...``. When the command's own
handler (``Interrupts``) takes a signal, ``RECEIVED`` and the signal's name are written
on stderr, so the test can let the paused call go on knowing the stop was seen.
``PAUSED_CLI_STOP_GRACE`` (seconds) shortens the time ``ask``'s work has to stop after a
signal (``sessions.cli.interrupts.STOP_GRACE``).
"""

from __future__ import annotations

import importlib
import os
import sys
from contextlib import contextmanager

from sessions.cli import interrupts, main
from sessions.cli.interrupts import Interrupts

PAUSED = "paused-cli: paused"
RECEIVED = "paused-cli: received"


def _pause() -> None:
    print(PAUSED, file=sys.stderr, flush=True)
    sys.stdin.readline()


def _pausing(original, when: str):
    if when == "exit":
        @contextmanager
        def managed(*args, **kwargs):
            with original(*args, **kwargs) as value:
                yield value
            _pause()

        return managed

    def wrapper(*args, **kwargs):
        if when == "before":
            _pause()
        result = original(*args, **kwargs)
        if when == "after":
            _pause()
        return result

    return wrapper


def _telling(received):
    def handler(self, number, frame):
        received(self, number, frame)
        print(f"{RECEIVED} {number}", file=sys.stderr, flush=True)

    return handler


if __name__ == "__main__":
    target, when, *argv = sys.argv[1:]
    module_name, name = target.split(":")
    owner = importlib.import_module(module_name)
    *path, name = name.split(".")
    for part in path:
        owner = getattr(owner, part)
    setattr(owner, name, _pausing(getattr(owner, name), when))
    Interrupts._received = _telling(Interrupts._received)
    if os.environ.get("PAUSED_CLI_STOP_GRACE"):
        interrupts.STOP_GRACE = float(os.environ["PAUSED_CLI_STOP_GRACE"])
    sys.exit(main(argv))
