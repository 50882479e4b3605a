"""Reading a checkpoint file's payload: whole into a new buffer, or into the caller's pieces.

The disk tier opens a file and checks its header; these read what follows. A restore
reads with ``read_pieces``: one scatter read puts each part of a file's state where
llama.cpp will read it from (see ``DiskTier.load_into``), so nothing is copied twice.
A file the disk tier's index already describes is read with ``read_in_one``: header,
state and logits in a single scatter read, checked afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ..bounded_read import READ_WITHOUT_BLOCKING
from .errors import CorruptCheckpointError
from .file_format import HEADER_SIZE, check_header, check_placed, parse_header
from .keys import ParsedAddress

_IOV_MAX = 1024
"""Pieces per ``preadv`` (Linux's ``IOV_MAX``)."""


@dataclass(frozen=True)
class StateSpan:
    """What a file holds, as far as placing its state goes: tokens and state bytes."""

    start: int
    end: int
    state_len: int


Place = Callable[[StateSpan, Callable[[int, int], bytes]], Sequence[memoryview] | None]
"""Where a restore wants a file's state: given what the file holds and a reader of the
state at an offset, the pieces (in file order) to read it into, or None to decline.

It may be asked twice for one file (``read_in_one`` then the checked read): each answer
stands alone."""


@dataclass(frozen=True)
class Placed:
    """A checkpoint read from disk into the caller's buffers (``CheckpointStore.read_into``)."""

    start: int
    end: int
    nbytes: int
    """Payload bytes read."""
    logits: np.ndarray | None
    """float32 logits after token ``end - 1`` as raw bytes, when the file keeps them."""


def read_payload(src, length: int) -> np.ndarray:
    """``length`` bytes from ``src`` into a new buffer (read straight into it)."""
    buf = np.empty(length, dtype=np.uint8)
    view, done = buf.data, 0
    while done < length:
        n = src.readinto(view[done:])
        if not n:
            break
        done += n
    return buf[:done]


def read_pieces(fd: int, pieces: Sequence[memoryview], offset: int) -> int:
    """Fill ``pieces`` in order from ``fd`` at ``offset`` with scatter reads; bytes read.

    One ``preadv`` per ``_IOV_MAX`` pieces; a short read (a file cut meanwhile) stops it.
    """
    done = 0
    index, skip = 0, 0
    while index < len(pieces):
        batch = [pieces[index][skip:], *pieces[index + 1 : index + _IOV_MAX]]
        n = os.preadv(fd, batch, offset + done)
        if n <= 0:
            break
        done += n
        while index < len(pieces) and n >= len(pieces[index]) - skip:
            n -= len(pieces[index]) - skip
            index, skip = index + 1, 0
        skip += n
    return done


def read_in_one(path: str, expected: ParsedAddress, span: StateSpan, size: int, place: Place) -> Placed | None:
    """A file whose index entry says ``span`` and ``size``, read into ``place``'s pieces
    with one scatter read (header, state, logits and one byte past the end); None when
    anything is not as expected, for the caller's checked read to sort out (and report).

    The index learnt the header when it listed the file, so the pieces can be known
    before the header is read again: one system call instead of an open file object, a
    ``fstat``, a header read and a payload read. Everything is checked after the read,
    as strictly as before: the header and its checksum, that it is the file the index
    described, that the file ends exactly there (nothing came into the byte past it),
    and the state's CRC over the pieces.
    """
    logits_len = size - HEADER_SIZE - span.state_len
    if logits_len < 0:
        return None
    try:
        # No fstat on this path: opened without blocking, a FIFO or device that took the
        # file's place since it was listed reads short or runs past the end, which the
        # checks below refuse, and the checked read (``open_regular``) then reports it.
        fd = os.open(path, READ_WITHOUT_BLOCKING)
    except OSError:
        return None
    try:
        pieces = place(span, lambda offset, n: os.pread(fd, n, HEADER_SIZE + offset))
        if pieces is None:
            return None
        if sum(len(piece) for piece in pieces) != span.state_len:
            raise ValueError("the pieces to read into do not add up to the state")
        if len(pieces) + 3 > _IOV_MAX:
            return None
        raw = bytearray(HEADER_SIZE)
        logits = np.empty(logits_len, dtype=np.uint8)
        got = os.preadv(fd, [raw, *pieces, *([logits.data] if logits_len else []), bytearray(1)], 0)
        if got != size:
            return None
        header = parse_header(bytes(raw))
        check_header(header, expected, size)
        if (header.start, header.end) != (span.start, span.end):
            return None
        check_placed(header, pieces, span.state_len, logits)  # refuses a state of another length
        mark_used(fd)
    except (CorruptCheckpointError, OSError):
        return None
    finally:
        os.close(fd)
    return Placed(header.start, header.end, size - HEADER_SIZE, logits if header.has_logits else None)


def mark_used(fd: int) -> None:
    """Set a file's times to now: its last use, which eviction reads back in the next process."""
    try:
        os.utime(fd)
    except OSError:
        pass
