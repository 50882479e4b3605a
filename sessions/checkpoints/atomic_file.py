"""Writing a file so that its final name only ever shows the whole file.

A checkpoint is read back by name; a torn file under that name would be caught by the
checksums, but would still cost a read and a report. So every write goes to a temp file in
the same folder and is renamed over the final name only once it is on stable storage. A
crash leaves at most a temp file, named after its writer's pid so that a later start can
tell a leftover from a write still in flight in another process.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from .. import durable
from ..durable import TEMP_SUFFIX as TEMP_SUFFIX

STALE_TEMP_SECONDS = 3600.0
"""A temp file this old is a leftover even if its writer's pid is alive (reused pid)."""

_TEMP_NAME = re.compile(r"\..+\.(\d+)\.[0-9a-f]{8}\.tmp")


def write_atomically(path: Path, chunks: Iterable[bytes | memoryview], *, sync: bool = True) -> None:
    """Write ``chunks`` to ``path`` so that the final name only ever shows a whole file.

    A crash at any point leaves at most a temp file, which ``DiskTier`` removes later.
    ``sync=False`` skips both fsyncs, for files whose reader checks every byte anyway
    (checkpoints carry checksums): a power cut can then leave a damaged file under the
    final name, which the reader deletes; a crashed process cannot.
    """
    durable.write_atomically(path, chunks, crash_label="checkpoint", sync=sync)


def is_stale_temp(path: Path, now: float) -> bool:
    """A temp file whose writer is gone (dead pid) or that is too old to be in flight."""
    try:
        if now - path.stat().st_mtime > STALE_TEMP_SECONDS:
            return True
    except OSError:
        return False
    match = _TEMP_NAME.fullmatch(path.name)
    if match is None:
        return False
    try:
        os.kill(int(match.group(1)), 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError, ValueError):
        return False
    return False


