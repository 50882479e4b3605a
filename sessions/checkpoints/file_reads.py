"""Reading a checkpoint file's payload: whole into a new buffer, or into the caller's pieces.

The disk tier opens a file and checks its header; these read what follows. A restore
reads with ``read_pieces``: one scatter read puts each part of a file's state where
llama.cpp will read it from (see ``DiskTier.load_into``), so nothing is copied twice.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .file_format import Header

_IOV_MAX = 1024
"""Pieces per ``preadv`` (Linux's ``IOV_MAX``)."""

Place = Callable[[Header, Callable[[int, int], bytes]], Sequence[memoryview] | None]
"""Where a restore wants a file's state: given its checked header and a reader of the
state at an offset, the pieces (in file order) to read it into, or None to decline."""


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
