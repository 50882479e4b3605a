"""Opt-in fault points: the process kills itself outright at a chosen moment.

Durability bugs hide in windows a few microseconds wide: between writing a checkpoint's
temp file and renaming it, between a database commit and the reply that reports it. A
kill after a random delay almost never lands there, so the crash trials
(``python -m tests.trials.crash``) name the moment instead::

    LLAMACHAT_CRASH_AT="checkpoint.before_rename:2"   # die at the 2nd time that point is reached
    LLAMACHAT_CRASH_AT="decode.batch:1,store.after_commit:3"

The process then sends itself SIGKILL: no ``finally`` block, no atexit handler, no
flush runs, exactly as when the power goes or the OOM killer strikes. With the variable
unset every point costs one dict lookup.

The points, each one line in its module:

- ``decode.batch``: ``sessions/branching/branch_engine.py``, ``BranchEngine._decode_to``,
  after each prompt batch has been decoded.
- ``generate.token``: ``sessions/branching/branch_engine.py``, ``generate``, after each reply
  token has been decoded.
- ``checkpoint.before_rename``: ``sessions/durable.py``, ``replacing``, when a checkpoint
  file is written: the temp file written and fsynced but not yet renamed.
- ``checkpoint.after_rename``: the same place, right after the rename.
- ``store.before_commit`` / ``store.after_commit``: ``sessions/store/database.py``,
  ``Database.transaction``, just before and just after the ``COMMIT`` of a transaction
  opened with ``crash_label="store"``, which ``SessionStore.add_message`` does.
"""

from __future__ import annotations

import os
import signal
import threading

from sessions.errors import LlamachatError

ENV_VAR = "LLAMACHAT_CRASH_AT"
POINTS: tuple[str, ...] = (
    "decode.batch",
    "generate.token",
    "checkpoint.before_rename",
    "checkpoint.after_rename",
    "store.before_commit",
    "store.after_commit",
)


class CrashSpecError(LlamachatError, ValueError):
    """``LLAMACHAT_CRASH_AT`` is malformed; a typo must not silently disarm a trial."""


def parse_spec(text: str) -> dict[str, int]:
    """``"point:n,point:n"`` as ``{point: n}``; an empty text arms nothing."""
    targets: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, count = item.rpartition(":")
        if not sep or name not in POINTS:
            raise CrashSpecError(
                f"{ENV_VAR}: {item!r} is not <point>:<n> with a point among {', '.join(POINTS)}"
            )
        if not count.isdigit() or int(count) < 1:
            raise CrashSpecError(f"{ENV_VAR}: in {item!r} the count must be a whole number of at least 1")
        targets[name] = int(count)
    return targets


_targets: dict[str, int] = parse_spec(os.environ.get(ENV_VAR, ""))
_counts: dict[str, int] = {}
_lock = threading.Lock()


def arm(spec: str) -> None:
    """Replace the armed points (and reset their counts); ``""`` disarms everything."""
    global _targets
    targets = parse_spec(spec)
    with _lock:
        _targets = targets
        _counts.clear()


def crashpoint(name: str) -> None:
    """Kill this process if ``name`` is armed and this is the n-th time it is reached."""
    target = _targets.get(name)
    if target is None:
        return
    with _lock:
        count = _counts.get(name, 0) + 1
        _counts[name] = count
    if count == target:
        _die()


def _die() -> None:
    kill = getattr(signal, "SIGKILL", None)
    if kill is None:  # pragma: no cover - Windows has no SIGKILL
        os._exit(137)
    os.kill(os.getpid(), kill)
