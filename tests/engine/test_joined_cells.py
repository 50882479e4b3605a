"""Cells-only states joined in place, from memory or from file pieces read into place."""

from __future__ import annotations

import numpy as np
import pytest

from sessions.llama.state_blob import (
    HEADER,
    STATE_MAGIC,
    JoinedCells,
    LayoutError,
    probe_shape,
    read_attention,
    shape_of,
    write_attention,
)

LAYERS = ((1, 16), (1, 16), (1, 8), (1, 8))
TAIL = bytes([0, 0, 0, 0, 1, 0, 0, 0])
SEQ = 1


def state(positions: list[int], layers=LAYERS, seq: int = SEQ, tail: bytes = TAIL) -> np.ndarray:
    """A cells-only state as llama.cpp writes it, with rows that tell cells apart."""
    count = len(positions)
    rng = np.random.default_rng(positions[0])
    rows = [(kind, row, rng.integers(0, 255, (count, row), dtype=np.uint8)) for kind, row in layers]
    size = HEADER.size + 8 + 12 * count + 8 + sum(12 + row * count for _k, row in layers) + len(tail)
    out = np.zeros(size, dtype=np.uint8)
    HEADER.pack_into(out.data, 0, STATE_MAGIC, seq)
    end = write_attention(out, HEADER.size, seq, np.array(positions, np.int32), rows)
    out[end:] = np.frombuffer(tail, dtype=np.uint8)
    return out


def joined_by_hand(parts: list[np.ndarray]) -> bytes:
    """The one state of all cells of ``parts``, in order, laid out directly."""
    sections = [read_attention(p, HEADER.size) for p in parts]
    positions = np.concatenate([s.positions for s in sections])
    layers = [(k, r, np.concatenate([s.layers[i][2] for s in sections])) for i, (k, r) in enumerate(LAYERS)]
    return bytes(_lay(positions, layers))


def _lay(positions: np.ndarray, layers) -> np.ndarray:
    count = len(positions)
    size = HEADER.size + 8 + 12 * count + 8 + sum(12 + row * count for _k, row, _r in layers) + len(TAIL)
    out = np.zeros(size, dtype=np.uint8)
    HEADER.pack_into(out.data, 0, STATE_MAGIC, SEQ)
    end = write_attention(out, HEADER.size, SEQ, positions, layers)
    out[end:] = np.frombuffer(TAIL, dtype=np.uint8)
    return out


def read_pieces(blob: np.ndarray, pieces: list[memoryview]) -> None:
    """What a scatter read of a file holding ``blob`` does."""
    offset = 0
    for piece in pieces:
        np.frombuffer(piece, dtype=np.uint8)[:] = blob[offset : offset + len(piece)]
        offset += len(piece)
    assert offset == len(blob)


def test_ranges_from_memory_and_from_file_pieces_make_the_state_joined_by_hand():
    parts = [state([0, 1, 2]), state([3, 4]), state([5, 6, 7, 8])]
    shape = shape_of(parts[0])
    joined = JoinedCells(shape, 9, np.full(4096, 0xEE, dtype=np.uint8))  # a used buffer: all is rewritten
    assert joined.copy(0, parts[0]) == 3
    for at, part in ((3, parts[1]), (5, parts[2])):
        count = len(read_attention(part, HEADER.size).positions)
        scratch = np.empty(len(shape.fixed(count)), dtype=np.uint8)
        pieces = joined.pieces(at, count, scratch)
        assert sum(len(p) for p in pieces) == shape.size(count) == len(part)
        read_pieces(part, pieces)
        joined.check(count, scratch)
    joined.check_cells(9)
    assert bytes(joined.blob) == joined_by_hand(parts)


def test_the_first_ranges_alone_when_a_later_one_failed():
    parts = [state([0, 1, 2]), state([3, 4])]
    joined = JoinedCells(shape_of(parts[0]), 9, np.zeros(4096, dtype=np.uint8))
    joined.copy(0, parts[0])
    joined.copy(3, parts[1])
    assert bytes(joined.first(5)) == joined_by_hand(parts)
    assert bytes(joined.first(3)) == bytes(parts[0])


def test_the_shape_is_probed_from_a_few_small_reads():
    part = state([10, 11, 12, 13])
    reads: list[tuple[int, int]] = []

    def read_at(offset: int, size: int) -> bytes:
        reads.append((offset, size))
        return bytes(part[offset : offset + size])

    shape, count = probe_shape(read_at, len(part))
    assert (shape, count) == (shape_of(part), 4)
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
    joined.copy(0, state([0, 1]))
    joined.check_cells(2)
    return joined


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_file_of_another_layout_is_refused_after_its_read(damage):
    shape = shape_of(state([0, 1]))
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
        probe_shape(read_at, len(damaged))
    assert len(reads) < 10
