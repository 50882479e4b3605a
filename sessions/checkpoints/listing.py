"""The checkpoint files of a folder, listed and deleted by a process that runs no store.

``llamachat cache`` and ``llamachat delete`` work on the folder while the app may be
using it. They only ever delete files, never write one: a store that later reads a
file that is gone drops it from its index and recomputes its tokens, as it does for a
file its own eviction took (``DiskTier._read_checked``).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..bounded_read import open_regular
from .errors import CorruptCheckpointError
from .file_format import HEADER_SIZE, Header, check_header, parse_header
from .keys import Key, is_model_folder, parse_address


@dataclass(frozen=True)
class CheckpointFile:
    """One checkpoint file, as its name and header describe it."""

    key: Key
    path: Path
    size: int
    """Bytes on disk, header included."""
    end: int | None
    """One past the last token position it covers; None when its header was not read
    (or failed its checks): no branch can then be told to own it."""

    @property
    def model_folder(self) -> str:
        """The folder of the model it belongs to: the hex id of the model's fingerprint."""
        return self.path.parent.name


def read_header(path: Path) -> tuple[Header, int, float]:
    """The parsed header of a file, its size and its modification time (raises OSError,
    CorruptCheckpointError)."""
    with os.fdopen(open_regular(path), "rb") as src:  # a FIFO named like one must not block
        info = os.fstat(src.fileno())
        return parse_header(src.read(HEADER_SIZE)), info.st_size, info.st_mtime


def list_files(directory: Path, *, headers: bool = True, models: Collection[str] | None = None,
               ) -> list[CheckpointFile]:
    """Every checkpoint file under ``directory`` (none if it does not exist), or those of
    the ``models`` folders (hex ids of model fingerprints) only.

    With ``headers`` each file's header is read and checked, for its end; without, the
    listing costs one stat per file. Temp files of writes in flight, and files of any
    other name, are not listed.
    """
    found: list[CheckpointFile] = []
    try:
        folders = [entry for entry in os.scandir(directory) if is_model_folder(entry.name) and entry.is_dir()
                   and (models is None or entry.name in models)]
    except FileNotFoundError:
        return found
    for folder in folders:
        try:
            names = list(os.scandir(folder.path))
        except FileNotFoundError:
            continue
        for entry in names:
            parsed = parse_address(folder.name, entry.name)
            if parsed is None:
                continue
            path = Path(entry.path)
            try:
                if headers:
                    header, size, _mtime = read_header(path)
                    check_header(header, parsed, size)
                    end: int | None = header.end
                else:
                    size, end = entry.stat().st_size, None
            except FileNotFoundError:
                continue  # deleted meanwhile
            except (OSError, CorruptCheckpointError):
                size, end = _size(path), None
            found.append(CheckpointFile(parsed.key, path, size, end))
    return found


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


@dataclass(frozen=True)
class Removed:
    """What deleting some files freed."""

    count: int
    nbytes: int
    failures: tuple[str, ...] = ()
    """One line per file that could not be deleted, saying why."""


def remove_files(files: Iterable[CheckpointFile]) -> Removed:
    """Delete ``files``; one already gone (taken by another process) frees nothing."""
    count = nbytes = 0
    failures: list[str] = []
    for file in files:
        try:
            file.path.unlink()
        except FileNotFoundError:
            continue
        except OSError as error:
            failures.append(f"{file.path}: {error.strerror or error}")
            continue
        count += 1
        nbytes += file.size
    return Removed(count, nbytes, tuple(failures))
