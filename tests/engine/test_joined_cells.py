"""Cells-only states joined in place, from memory or from file pieces read into place.

Every case runs over the layouts llama.cpp writes: plain cells, cells carrying extra
position data (M-RoPE and IMROPE models such as Qwen3.5), and keys without values (MLA).
"""

from __future__ import annotations

import numpy as np
import pytest

from sessions.llama.state_blob import CELL_EXT_BYTES, HEADER, STATE_MAGIC, JoinedCells, LayoutError, StateLayout

LAYERS = ((1, 16), (1, 16), (1, 8), (1, 8))
TAIL = bytes([0, 0, 0, 0, 1, 0, 0, 0])
SEQ = 1
PLAIN = StateLayout()
LAYOUTS = {
    "plain": PLAIN,
    "extended cells": StateLayout(cell_ext=CELL_EXT_BYTES),
    "keys only": StateLayout(values=False),
}


@pytest.fixture(params=list(LAYOUTS))
def layout(request) -> StateLayout:
    return LAYOUTS[request.param]


def state(positions: list[int], layers=LAYERS, seq: int = SEQ, tail: bytes = TAIL,
          layout: StateLayout = PLAIN) -> np.ndarray:
    """A cells-only state as llama.cpp writes it, with rows (and extra cell fields) that tell
    cells apart."""
    count = len(positions)
    rng = np.random.default_rng(positions[0])
    rows = [(kind, row, rng.integers(0, 255, (count, row), dtype=np.uint8)) for kind, row in layers]
    cells = np.zeros((count, layout.cell_bytes // 4), np.int32)
    cells[:, 0] = positions
    cells[:, 2 : layout.seq_column] = rng.integers(0, 1000, (count, layout.seq_column - 2))
    out = np.zeros(HEADER.size + layout.attention_bytes(count, layers) + len(tail), dtype=np.uint8)
    HEADER.pack_into(out.data, 0, STATE_MAGIC, seq)
    end = layout.write_attention(out, HEADER.size, seq, cells, rows)
    out[end:] = np.frombuffer(tail, dtype=np.uint8)
    return out


def joined_by_hand(parts: list[np.ndarray], layout: StateLayout = PLAIN) -> bytes:
    """The one state of all cells of ``parts``, in order, laid out directly."""
    sections = [layout.read_attention(p, HEADER.size) for p in parts]
    cells = np.concatenate([s.cells for s in sections])
    layers = [(k, r, np.concatenate([s.layers[i][2] for s in sections])) for i, (k, r) in enumerate(LAYERS)]
    out = np.zeros(HEADER.size + layout.attention_bytes(len(cells), layers) + len(TAIL), dtype=np.uint8)
    HEADER.pack_into(out.data, 0, STATE_MAGIC, SEQ)
    end = layout.write_attention(out, HEADER.size, SEQ, cells, layers)
    out[end:] = np.frombuffer(TAIL, dtype=np.uint8)
    return bytes(out)


def read_pieces(blob: np.ndarray, pieces: list[memoryview]) -> None:
    """What a scatter read of a file holding ``blob`` does."""
    offset = 0
    for piece in pieces:
        np.frombuffer(piece, dtype=np.uint8)[:] = blob[offset : offset + len(piece)]
        offset += len(piece)
    assert offset == len(blob)


def test_ranges_from_memory_and_from_file_pieces_make_the_state_joined_by_hand(layout):
    parts = [state([0, 1, 2], layout=layout), state([3, 4], layout=layout), state([5, 6, 7, 8], layout=layout)]
    shape = layout.shape_of(parts[0])
    joined = JoinedCells(shape, 9, np.full(4096, 0xEE, dtype=np.uint8))  # a used buffer: all is rewritten
    assert joined.copy(0, parts[0]) == 3
    for at, part in ((3, parts[1]), (5, parts[2])):
        count = len(layout.read_attention(part, HEADER.size).positions)
        scratch = np.empty(len(shape.fixed(count)), dtype=np.uint8)
        pieces = joined.pieces(at, count, scratch)
        assert sum(len(p) for p in pieces) == shape.size(count) == len(part)
        read_pieces(part, pieces)
        joined.check(count, scratch)
    joined.check_cells(9)
    assert bytes(joined.blob) == joined_by_hand(parts, layout)


def test_the_first_ranges_alone_when_a_later_one_failed(layout):
    parts = [state([0, 1, 2], layout=layout), state([3, 4], layout=layout)]
    joined = JoinedCells(layout.shape_of(parts[0]), 9, np.zeros(4096, dtype=np.uint8))
    joined.copy(0, parts[0])
    joined.copy(3, parts[1])
    assert bytes(joined.first(5)) == joined_by_hand(parts, layout)
    assert bytes(joined.first(3)) == bytes(parts[0])


def test_a_state_read_with_another_layout_is_refused():
    """Cells with extra position data read as plain cells (the error that lost every
    Qwen3.5 reply) do not parse: the cell list then runs into the layers."""
    extended = state([0, 1, 2, 3], layout=LAYOUTS["extended cells"])
    with pytest.raises(LayoutError):
        PLAIN.read_attention(extended, HEADER.size)
    with pytest.raises(LayoutError):
        LAYOUTS["extended cells"].read_attention(state([0, 1, 2, 3]), HEADER.size)


def test_the_shape_is_probed_from_a_few_small_reads(layout):
    part = state([10, 11, 12, 13], layout=layout)
    reads: list[tuple[int, int]] = []

    def read_at(offset: int, size: int) -> bytes:
        reads.append((offset, size))
        return bytes(part[offset : offset + size])

    shape, count = layout.probe_shape(read_at, len(part))
    assert (shape, count) == (layout.shape_of(part), 4)
    assert shape.tail == TAIL and shape.seq == SEQ
    assert sum(size for _o, size in reads) < 200  # the fields only, not the rows


DAMAGE = {
    "another layer size": lambda: state([3, 4], layers=((1, 16), (1, 16), (1, 8), (1, 16))),
    "another sequence": lambda: state([3, 4], seq=0),
    "a tail with cells": lambda: state([3, 4], tail=bytes([0, 0, 0, 0, 2, 0, 0, 0])),
    "shared cells": lambda: _shared(state([3, 4])),
}
FILE_REFUSED_BY = {  # what refuses a file of each damage (a state in memory: ``copy``, always)
    "another layer size": "size",
    "another sequence": "check",
    "a tail with cells": "check",
    "shared cells": "check_cells",  # the fields are this layout's; one cell is not
}


def _joined_after_good_cells(shape) -> JoinedCells:
    joined = JoinedCells(shape, 4, np.zeros(4096, dtype=np.uint8))
    joined.copy(0, state([0, 1], layout=shape.layout))
    joined.check_cells(2)
    return joined


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_file_of_another_layout_is_refused_after_its_read(damage):
    shape = PLAIN.shape_of(state([0, 1]))
    other = DAMAGE[damage]()
    by_file = FILE_REFUSED_BY[damage]

    joined = _joined_after_good_cells(shape)
    scratch = np.empty(len(shape.fixed(2)), dtype=np.uint8)
    pieces = joined.pieces(2, 2, scratch)
    if by_file == "size":  # a restore compares sizes before it asks for pieces, and declines the file
        assert shape.size(2) != len(other) and sum(len(p) for p in pieces) != len(other)
    else:
        assert sum(len(p) for p in pieces) == shape.size(2) == len(other)
        read_pieces(other, pieces)
        if by_file == "check":
            with pytest.raises(LayoutError):
                joined.check(2, scratch)
        else:
            joined.check(2, scratch)
            with pytest.raises(LayoutError):
                joined.check_cells(4)

    with pytest.raises(LayoutError):  # the same state held in memory
        _joined_after_good_cells(shape).copy(2, other)


def _shared(blob: np.ndarray) -> np.ndarray:
    meta = np.frombuffer(blob, dtype="<i4", count=6, offset=HEADER.size + 8).reshape(2, 3)
    meta[1, 1] = 2  # a cell two sequences share
    return blob


@pytest.mark.parametrize("field", ["cell count", "layer count", "row size"])
def test_a_damaged_field_never_sends_the_probe_past_the_state(field):
    part = state([10, 11, 12, 13])
    offset = {"cell count": HEADER.size + 4, "layer count": HEADER.size + 8 + 12 * 4 + 4,
              "row size": HEADER.size + 8 + 12 * 4 + 8 + 4}[field]
    damaged = part.copy()
    damaged[offset : offset + 4] = np.frombuffer(np.uint32(0x7FFFFFFF).tobytes(), dtype=np.uint8)
    reads: list[int] = []

    def read_at(pos: int, size: int) -> bytes:
        reads.append(pos)
        assert 0 <= pos and pos + size <= len(damaged)
        return bytes(damaged[pos : pos + size])

    with pytest.raises(LayoutError):
        PLAIN.probe_shape(read_at, len(damaged))
    assert len(reads) < 10
