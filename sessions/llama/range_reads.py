"""The attention cells of many ranges of the live sequence, read out together.

A range's checkpoint is its attention cells (``LlamaContext.read_range``): copied to the
spare sequence and read from there. On a hybrid model that read carries the spare
sequence's recurrent state too, whatever range was copied (llama.cpp's recurrent memory
shares its one state with every sequence copied from it, and has no read of the
attention part alone), and the state is thrown away: read one range at a time, the
ranges after a long prefill copied that state out once each, many times their own size
on a large hybrid. So the ranges are copied to the spare sequence together, read once
per group, and each range's cells are cut out of the group's by position, byte for byte
what a read of that range alone gives (the spare sequence's cells in cache order).

Not for a sliding window: the window part of a read is masked by the spare sequence's
last position, so a group's read would lose the pieces of all but its last range
(``Captures`` reads those one by one, with their pieces).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from sessions.llama.sequences import LIVE, SPARE
from sessions.llama.state_blob import FLAGS_FULL, HEADER, STATE_MAGIC, read_header

if TYPE_CHECKING:
    from sessions.llama.context import LlamaContext

GROUP_BYTES = 64 << 20
"""Most bytes of cells read in one group: the group's read is held whole until cut up."""


def read_ranges(ctx: LlamaContext, spans: Sequence[tuple[int, int]]) -> list[np.ndarray]:
    """The cells of each live range ``[start, end)`` in ``spans``, as ``read_range`` gives them.

    Grouped by ``GROUP_BYTES``, a cell's bytes known from the layout check's cells
    (``LlamaContext.checked_cells_shape``) or, without it, from a first read of one
    range; each group is one read of the spare sequence.
    """
    out: list[np.ndarray] = []
    shape = ctx.checked_cells_shape
    per_cell = float(shape.size(2) - shape.size(1)) if shape is not None else 0.0
    i = 0
    while i < len(spans):
        group = [spans[i]]
        i += 1
        if per_cell:
            tokens = group[0][1] - group[0][0]
            while i < len(spans) and (tokens + spans[i][1] - spans[i][0]) * per_cell <= GROUP_BYTES:
                tokens += spans[i][1] - spans[i][0]
                group.append(spans[i])
                i += 1
        cells, per_cell = _read_group(ctx, group)
        out.extend(cells)
    return out


def _read_group(ctx: LlamaContext, group: Sequence[tuple[int, int]]) -> tuple[list[np.ndarray], float]:
    """Each range's cells from one read of the group; and the bytes of a cell's rows and fields."""
    for start, end in group:
        ctx.seq_cp(LIVE, SPARE, start, end)
    try:
        blob = ctx.state_read(SPARE, FLAGS_FULL)
    finally:
        ctx.seq_rm(SPARE)
    layout = ctx.layout
    section = layout.read_attention(blob, HEADER.size)
    positions = section.positions
    per_cell = (section.end - section.start) / max(len(positions), 1)
    if len(group) == 1:
        return [ctx.cells_only(blob)], per_cell
    tail, seq = ctx.cells_tail(), read_header(blob)
    out = []
    for start, end in group:
        at = np.flatnonzero((positions >= start) & (positions < end))
        layers = tuple((kind, row, rows[at]) for kind, row, rows in section.layers)
        cells = np.empty(HEADER.size + layout.attention_bytes(len(at), layers) + len(tail), dtype=np.uint8)
        HEADER.pack_into(cells.data, 0, STATE_MAGIC, seq)
        done = layout.write_attention(cells, HEADER.size, seq, section.cells[at], layers)
        cells[done:] = tail
        out.append(cells)
    return out, per_cell
