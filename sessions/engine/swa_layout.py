"""Put a sliding-window cache back in one canonical cell order at every segment boundary.

llama.cpp keeps a sliding-window cache as a ring: once it is full, new tokens reuse the
cells of tokens that fell out of the window, so positions end up in the buffer in an
order that depends on everything that happened before. Flash attention sums over cells
in buffer order, so two caches with the same cells in another order give logits that
differ in the last bits. A branch rebuilt from checkpoints lays its cells out afresh,
so without care it would not match the branch computed in one go.

The fix is to make the order a function of the contents only: at every segment boundary
(on every route) the window is read out, its cells sorted by position, and written back.
Writing back first empties the window, which moves llama.cpp's search start to the
lowest free cell; cell 0 is always occupied in a window laid out this way, so the
window lands in cells 0..w-1 whatever the route, and the next tokens land after it.

The layout of the serialised window (llama.cpp's ``state_write`` for one sequence of a
KV cache, flash attention on so V is not transposed) is, all little-endian: the
context's header ``magic:u32 = 0xaf143cd8``, ``seq:i32``; ``n_stream:u32``, then per stream
``cell_count:u32``, ``cell_count`` x (``pos:i32``,
``n_seq:u32``, ``n_seq`` x ``seq:i32``), ``v_trans:u32``, ``n_layer:u32``, per layer
(``k_type:i32``, ``k_row:u64``, rows), per layer (``v_type:i32``, ``v_row:u64``, rows).
"""

from __future__ import annotations

import struct

import numpy as np

PARTIAL_ONLY = 1  # LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY: only the window of an iSWA cache
STATE_MAGIC = 0xAF143CD8  # llama_context's io_magic, first in every sequence state


class LayoutError(Exception):
    """The blob is not in the layout this module knows (another llama.cpp version?)."""


def sorted_by_position(blob: bytes) -> bytes:
    """The same serialised cache with its cells in position order."""
    out = bytearray()
    off = 0

    def take(n: int) -> bytes:
        nonlocal off
        if off + n > len(blob):
            raise LayoutError("the window state ends early")
        chunk = blob[off : off + n]
        off += n
        return chunk

    magic, seq = struct.unpack("<Ii", take(8))
    if magic != STATE_MAGIC:
        raise LayoutError("not a llama.cpp sequence state")
    (n_stream,) = struct.unpack("<I", take(4))
    out += struct.pack("<IiI", magic, seq, n_stream)
    for _ in range(n_stream):
        (count,) = struct.unpack("<I", take(4))
        out += struct.pack("<I", count)
        if count == 0:
            continue
        metas, positions = [], []
        for _ in range(count):
            pos, n_seq = struct.unpack("<iI", take(8))
            metas.append(struct.pack("<iI", pos, n_seq) + take(4 * n_seq))
            positions.append(pos)
        order = np.argsort(np.array(positions, dtype=np.int64), kind="stable")
        out += b"".join(metas[i] for i in order)
        v_trans, n_layer = struct.unpack("<II", take(8))
        if v_trans:
            raise LayoutError("V is stored transposed (flash attention off)")
        out += struct.pack("<II", v_trans, n_layer)
        for _ in range(2 * n_layer):  # K of every layer, then V of every layer
            kind, row = struct.unpack("<iQ", take(12))
            rows = np.frombuffer(take(row * count), dtype=np.uint8).reshape(count, row)
            out += struct.pack("<iQ", kind, row) + rows[order].tobytes()
    if off != len(blob):
        raise LayoutError("the window state has bytes this layout does not explain")
    return bytes(out)


def canonicalize_window(ctx, seq: int = 0) -> bool:
    """Re-lay the sliding window of ``seq`` in position order from cell 0.

    Returns False (and changes nothing) when the state is not in the known layout. On a
    failed write-back the window is gone and the caller must rebuild the sequence.
    """
    blob = ctx.state_get(seq, PARTIAL_ONLY)
    try:
        ordered = sorted_by_position(blob)
    except LayoutError:
        return False
    if not ctx.state_set(ordered, seq, PARTIAL_ONLY):
        raise RuntimeError("llama.cpp refused the re-laid window state")
    return True
