"""Writing a file so that a crash leaves either the old file or the whole new one.

Every file llamachat writes for later (checkpoints, the database backup, the config,
exports, made models) goes through ``replacing``: the bytes go to a private temp file in
the same folder, which is fsynced and renamed over the final name, and then the folder
is fsynced too (a rename is atomic, but not durable until the folder is flushed). The
temp file is named ``.NAME.PID.RANDOM.tmp`` so that a later start can tell a leftover of
a dead process from a write still in flight in another one (``is_stale_temp``).
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sessions.crashpoints import crashpoint

TEMP_SUFFIX = ".tmp"
PRIVATE = 0o600
"""Mode of every file written here: chats, models' states and settings are the user's alone."""
STALE_TEMP_SECONDS = 3600.0
"""A temp file this old is a leftover even if its writer's pid is alive (reused pid)."""

_TEMP_NAME = re.compile(r"\..+\.(\d+)\.[0-9a-f]{8}\.tmp")


def temp_name(final: Path) -> Path:
    """A fresh temp path beside ``final``, naming this process."""
    return final.with_name(f".{final.name}.{os.getpid()}.{secrets.token_hex(4)}{TEMP_SUFFIX}")


@contextmanager
def replacing(path: Path, *, crash_label: str | None = None, sync: bool = True) -> Iterator[Path]:
    """Yield a new, empty, private temp path; when the block ends, it replaces ``path``.

    The caller writes the temp file by path (SQLite's backup, the GGUF writer) or through
    ``write_atomically``. On an exception the temp file is removed and ``path`` is left as
    it was. ``crash_label`` names the crash points ``<label>.before_rename`` and
    ``<label>.after_rename`` (see ``sessions.crashpoints``). ``sync=False`` skips both
    fsyncs, for files whose reader checks every byte anyway (checkpoints carry checksums):
    a power cut can then leave a damaged file under the final name, which the reader
    deletes; a crashed process cannot, since its writes are in the page cache.
    """
    temp = temp_name(path)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), PRIVATE)
    os.close(fd)
    try:
        yield temp
        os.chmod(temp, PRIVATE)  # a writer that recreated the file may have widened it
        if sync:
            fsync_file(temp)
        if crash_label:
            crashpoint(f"{crash_label}.before_rename")
        os.replace(temp, path)
        if crash_label:
            crashpoint(f"{crash_label}.after_rename")
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    if sync:
        fsync_folder(path.parent)


def write_atomically(
    path: Path, data: str | bytes | Iterable[bytes | memoryview], *, crash_label: str | None = None,
    sync: bool = True,
) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8) in one durable step (0600)."""
    chunks: Iterable[bytes | memoryview]
    if isinstance(data, str):
        chunks = (data.encode("utf-8"),)
    elif isinstance(data, bytes | bytearray | memoryview):
        chunks = (bytes(data),)
    else:
        chunks = data
    with replacing(path, crash_label=crash_label, sync=sync) as temp, open(temp, "wb") as out:
        for chunk in chunks:
            out.write(chunk)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_folder(folder: Path) -> None:
    """Best effort: some file systems (and platforms) cannot open or sync a folder."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


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
