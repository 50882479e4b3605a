"""Reading and writing llama.cpp sequence-state blobs without copying them through Python.

``llama_state_seq_get_data_ext`` writes one sequence's memory as: the context header
(``magic:u32 = 0xaf143cd8``, ``seq:i32``), then one section per memory part. For a
model with a sliding window the parts are the full-attention cache then the window cache
(``PARTIAL_ONLY`` gives the window alone); for a hybrid model the attention cache then
the recurrent state (``PARTIAL_ONLY`` gives the recurrent state alone); a plain model
has one attention section, a recurrent model one recurrent section.

An attention section (llama.cpp's ``llama_kv_cache::state_write`` for one sequence,
flash attention on, so V is not transposed) is, little-endian::

    n_stream:u32, then per stream
      cell_count:u32, and if it is not 0:
        cell_count x (pos:i32, n_seq:u32 = 1, seq:i32)
        v_trans:u32 = 0, n_layer:u32
        n_layer x (k_type:i32, k_row:u64, cell_count x k_row bytes)
        n_layer x (v_type:i32, v_row:u64, cell_count x v_row bytes)

Cells appear in the order of their index in the cache. The checkpoint code splits and
joins these sections (the attention cells of a range apart from the window or
recurrent state at its end), and the window code re-lays cells; both work on numpy
views of one buffer, so a blob is copied only where bytes really move. The layout is
the one of the pinned llama.cpp release; a blob that does not parse raises
``LayoutError`` and the caller falls back to recomputing.
"""

from __future__ import annotations

import ctypes
import struct
from dataclasses import dataclass

import numpy as np

STATE_MAGIC = 0xAF143CD8
"""llama_context's ``io_magic``, first in every sequence state."""
HEADER = struct.Struct("<Ii")
FLAGS_FULL = 0
FLAGS_PARTIAL = 1
"""``LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY``: only the window (iSWA) or the recurrent state (hybrid)."""
_CELL_META = 12  # pos:i32, n_seq:u32, seq:i32


class LayoutError(Exception):
    """The blob is not in the layout this module knows (another llama.cpp version?)."""


Buffer = bytes | bytearray | memoryview | np.ndarray


def as_array(blob: Buffer) -> np.ndarray:
    """A uint8 view of ``blob`` (no copy)."""
    if isinstance(blob, np.ndarray):
        return blob.reshape(-1).view(np.uint8)
    return np.frombuffer(blob, dtype=np.uint8)


def pointer(blob: np.ndarray) -> ctypes._Pointer[ctypes.c_uint8]:
    """The address of a numpy buffer as the ``uint8_t *`` llama.cpp's state calls take."""
    address = blob.__array_interface__["data"][0]  # cheaper than ``blob.ctypes``
    return ctypes.cast(address, ctypes.POINTER(ctypes.c_uint8))


@dataclass(frozen=True)
class AttentionSection:
    """One attention-cache section of a blob, as views into it."""

    start: int
    """Byte offset of the section (its ``n_stream`` field)."""
    end: int
    """Byte offset just past it."""
    positions: np.ndarray
    """int32 position of each cell, in cache order."""
    layers: tuple[tuple[int, int, np.ndarray], ...]
    """``(type, row_bytes, rows)`` for every K layer then every V layer; ``rows`` has one
    row per cell."""

    @property
    def n_layer(self) -> int:
        return len(self.layers) // 2


def read_header(blob: np.ndarray) -> int:
    """Check the context header; returns the sequence id it was written for."""
    if len(blob) < HEADER.size:
        raise LayoutError("the state is shorter than its header")
    magic, seq = HEADER.unpack_from(blob.data, 0)
    if magic != STATE_MAGIC:
        raise LayoutError("not a llama.cpp sequence state")
    return int(seq)


def _read_cells(blob: np.ndarray, offset: int) -> np.ndarray:
    """The cell metadata (position, sequence count, sequence) of the section at ``offset``."""
    (n_stream,) = struct.unpack_from("<I", blob.data, offset)
    if n_stream != 1:
        raise LayoutError(f"{n_stream} cache streams (only a unified cache is supported)")
    (count,) = struct.unpack_from("<I", blob.data, offset + 4)
    if offset + 8 + _CELL_META * count > len(blob):
        raise LayoutError("the state ends inside its cell list")
    meta = np.frombuffer(blob, dtype="<i4", count=3 * count, offset=offset + 8).reshape(count, 3)
    if count and not np.all(meta[:, 1] == 1):
        raise LayoutError("cells shared by several sequences")
    return meta


def read_positions(blob: np.ndarray, offset: int) -> np.ndarray:
    """The cell positions of the attention section at ``offset``, without its layers."""
    try:
        return _read_cells(blob, offset)[:, 0]
    except struct.error:
        raise LayoutError("the state ends early") from None


def read_attention(blob: np.ndarray, offset: int) -> AttentionSection:
    """Parse the attention section at ``offset`` (views, no copies)."""
    try:
        meta = _read_cells(blob, offset)
        count = len(meta)
        pos = offset + 8
        if count == 0:
            return AttentionSection(offset, pos, np.zeros(0, np.int32), ())
        pos += _CELL_META * count
        v_trans, n_layer = struct.unpack_from("<II", blob.data, pos)
        pos += 8
        if v_trans:
            raise LayoutError("V is stored transposed (flash attention off)")
        layers = []
        for _ in range(2 * n_layer):
            kind, row = struct.unpack_from("<iQ", blob.data, pos)
            pos += 12
            size = row * count
            if pos + size > len(blob):
                raise LayoutError("the state ends inside a layer")
            layers.append((kind, row, blob[pos : pos + size].reshape(count, row)))
            pos += size
    except struct.error:
        raise LayoutError("the state ends early") from None
    return AttentionSection(offset, pos, meta[:, 0], tuple(layers))


def attention_bytes(positions: np.ndarray, layers) -> int:
    """Size of an attention section with these cells and layer row sizes."""
    count = len(positions)
    if count == 0:
        return 8
    return 8 + _CELL_META * count + 8 + sum(12 + row * count for _kind, row, _rows in layers)


def write_attention(out: np.ndarray, offset: int, seq: int, positions: np.ndarray, layers) -> int:
    """Write an attention section into ``out`` at ``offset``; returns the end offset.

    ``layers`` is ``(type, row_bytes, rows)`` per K then V layer, where ``rows`` is an
    array of ``len(positions)`` rows, or None for rows left as they are in ``out``
    (the caller fills them, or they are filler that nothing reads).
    """
    count = len(positions)
    struct.pack_into("<II", out.data, offset, 1, count)
    pos = offset + 8
    if count == 0:
        return pos
    meta = np.frombuffer(out, dtype="<i4", count=3 * count, offset=pos).reshape(count, 3)
    meta[:, 0] = positions
    meta[:, 1] = 1
    meta[:, 2] = seq
    pos += _CELL_META * count
    struct.pack_into("<II", out.data, pos, 0, len(layers) // 2)
    pos += 8
    for kind, row, rows in layers:
        struct.pack_into("<iQ", out.data, pos, kind, row)
        pos += 12
        if rows is not None:
            out[pos : pos + row * count].reshape(count, row)[...] = rows
        pos += row * count
    return pos


def split_attention(blob: np.ndarray) -> tuple[AttentionSection, np.ndarray]:
    """The attention section of a full-state blob, and everything after it."""
    read_header(blob)
    section = read_attention(blob, HEADER.size)
    return section, blob[section.end :]


def join_attention(blobs: list[np.ndarray], tail: np.ndarray) -> np.ndarray:
    """One state holding the attention cells of several states, in order, then ``tail``.

    Restoring a branch's ranges one ``llama_state_seq_set_data`` at a time costs a call,
    a sequence copy and a cache scan per range; joined, the cells land in the same cells
    of the cache (llama.cpp fills free cells in order either way) in one call. ``tail`` is
    the rest of a state that says "no cells" for the other memory parts.
    """
    sections = [read_attention(blob, HEADER.size) for blob in blobs]
    sections = [s for s in sections if len(s.positions)]
    if not sections:
        raise LayoutError("nothing to join")
    shape = [(kind, row) for kind, row, _rows in sections[0].layers]
    if any([(kind, row) for kind, row, _rows in s.layers] != shape for s in sections):
        raise LayoutError("the states to join have other layers")
    positions = np.concatenate([s.positions for s in sections])
    size = HEADER.size + attention_bytes(positions, sections[0].layers) + len(tail)
    out = np.empty(size, dtype=np.uint8)
    out[: HEADER.size] = blobs[0][: HEADER.size]
    layers = [(kind, row, None) for kind, row in shape]
    end = write_attention(out, HEADER.size, read_header(blobs[0]), positions, layers)
    joined = read_attention(out, HEADER.size)
    for index, (_kind, _row, rows) in enumerate(joined.layers):
        np.concatenate([s.layers[index][2] for s in sections], out=rows)
    out[end:] = tail
    return out
