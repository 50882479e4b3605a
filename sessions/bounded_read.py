"""Reading a whole file the user names, safely: a regular file only, and only so much of it.

A template override and an imported chat are files a user (or a stranger's instructions)
points at. A FIFO or ``/dev/stdin`` reports a size of 0 and blocks a read until a writer
comes; ``/dev/zero`` never ends. So the file is opened without blocking and checked
through the open descriptor (not the name, which could be swapped in between) before
anything is read, and the read stops one byte past the limit whatever ``fstat`` said (the
file may grow meanwhile).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from sessions.errors import LlamachatError


class NotRegularFile(LlamachatError, OSError):
    """A pipe, a device or a socket: nothing a whole file can be read from."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(f"{path} is not a regular file")
        self.strerror = "not a regular file (a pipe or a device)"
        self.filename = str(path)


READ_WITHOUT_BLOCKING = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
"""Open flags that never wait for a writer: a FIFO opened so reads as empty."""


def open_regular(path: Path | str) -> int:
    """A descriptor open for reading on ``path``, a regular file; ``NotRegularFile`` for
    anything else (a FIFO would block the open until a writer came, a device never ends),
    ``IsADirectoryError`` for a folder, or the ``OSError`` of opening it.

    The descriptor keeps ``O_NONBLOCK``, which changes nothing for a regular file.
    """
    fd = os.open(path, READ_WITHOUT_BLOCKING)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path)
    except BaseException:
        os.close(fd)
        raise
    return fd


class FileTooLarge(LlamachatError, OSError):
    """More bytes than the caller takes."""

    def __init__(self, size: int | None, limit: int) -> None:
        super().__init__(f"larger than {limit:,} bytes")
        self.size = size
        """Its size when ``fstat`` told it, None when the read found more than it said."""
        self.limit = limit


def read_regular_file(path: Path, limit: int) -> bytes:
    """The bytes of ``path``, a regular file of at most ``limit`` bytes.

    Raises ``NotRegularFile``, ``FileTooLarge``, or the ``OSError`` of opening or reading
    it (``FileNotFoundError``, ``IsADirectoryError``, ``PermissionError``...).
    """
    fd = open_regular(path)
    try:
        info = os.fstat(fd)
        if info.st_size > limit:
            raise FileTooLarge(info.st_size, limit)
        with os.fdopen(fd, "rb") as file:
            fd = -1  # the file object closes it now
            data = file.read(limit + 1)
    finally:
        if fd >= 0:
            os.close(fd)
    if len(data) > limit:
        raise FileTooLarge(None, limit)
    return data
