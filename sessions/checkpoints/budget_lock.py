"""One writer at a time per checkpoint folder, across processes, for the disk budget.

The budget is for the folder, not for one process: the app, ``ask`` commands and a
server writing into it at once each decide from the folder's real total under this lock
(``DiskTier.save``), so together they stay within it. An advisory ``flock`` on a file in
the folder: released by the kernel when its holder ends, even by SIGKILL.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = ".budget.lock"


@contextmanager
def budget_lock(directory: Path) -> Iterator[None]:
    """Hold the folder's budget lock (blocking); a folder where it cannot be made is used
    without it (the budget then holds per process, as it would on a filesystem without
    locks)."""
    try:
        fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
