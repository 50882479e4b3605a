"""What an SQLite error means for the user: damage, a lock, read-only media or a full disk.

Only real damage may lead to replacing the database by its backup. A database that is
locked by another program, on read-only media or on a full disk is healthy: treating it
as damaged would set aside a good file (and once replaced a locked database by an older
copy). SQLite says which case it is in its result code; Python 3.11 exposes it as
``sqlite_errorcode``, and for errors made elsewhere (or older Pythons) the message text,
which SQLite fixes per code, decides.
"""

from __future__ import annotations

import errno
import os
from enum import Enum
from pathlib import Path


class Cause(Enum):
    DAMAGED = "damaged"
    BUSY = "busy"
    READ_ONLY = "read-only"
    FULL = "full"
    OTHER = "other"


# Primary result codes (sqlite3.h).
_BY_CODE = {
    5: Cause.BUSY,  # SQLITE_BUSY
    6: Cause.BUSY,  # SQLITE_LOCKED
    8: Cause.READ_ONLY,  # SQLITE_READONLY
    3: Cause.READ_ONLY,  # SQLITE_PERM
    13: Cause.FULL,  # SQLITE_FULL
    11: Cause.DAMAGED,  # SQLITE_CORRUPT
    26: Cause.DAMAGED,  # SQLITE_NOTADB
}
_BY_TEXT = (
    ("database is locked", Cause.BUSY),
    ("database table is locked", Cause.BUSY),
    ("database schema is locked", Cause.BUSY),
    ("readonly database", Cause.READ_ONLY),
    ("read-only", Cause.READ_ONLY),
    ("disk is full", Cause.FULL),
    ("malformed", Cause.DAMAGED),
    ("file is not a database", Cause.DAMAGED),
)


SQLITE_IOERR = 10
NEARLY_FULL_BYTES = 256 * 1024
"""Free space below which an I/O error is taken for a full disk (SQLite cannot say)."""


def cause_of(error: BaseException, folder: Path | None = None) -> Cause:
    """The kind of failure ``error`` reports (``OTHER`` for bugs, I/O errors and the rest).

    SQLite reports a disk that fills while it grows its shared-memory file as a plain
    I/O error; with ``folder`` (where the database lives) such an error on a disk with
    next to no free space counts as ``FULL``.
    """
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _BY_CODE:
        return _BY_CODE[code & 0xFF]
    io_error = code & 0xFF == SQLITE_IOERR if isinstance(code, int) else "disk i/o error" in str(error).lower()
    if io_error and folder is not None and _nearly_full(folder):
        return Cause.FULL
    text = str(error).lower()
    for words, cause in _BY_TEXT:
        if words in text:
            return cause
    if isinstance(error, OSError) and error.errno is not None:
        if error.errno == errno.ENOSPC:
            return Cause.FULL
        if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return Cause.READ_ONLY
    return Cause.OTHER


def _nearly_full(folder: Path) -> bool:
    try:
        info = os.statvfs(folder)
    except (OSError, AttributeError):
        return False
    return info.f_bavail * info.f_frsize < NEARLY_FULL_BYTES
