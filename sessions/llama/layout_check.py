"""A check, once per context, that this model's states parse as ``state_blob`` reads them.

The layout of a cell comes from the model's hyperparameters (``StateLayout``), and the
rest of a state from llama.cpp's code for each memory kind. A model of an architecture
that lays its memory out otherwise (a new cell field, a new memory part) would otherwise
be found out only when its first checkpoint is read, after a reply. So when a context
is made, a few tokens are decoded into the empty live sequence, and its states are read
back and parsed as every checkpoint would be:

- the whole state: its first attention section holds those tokens' cells at their
  positions, each of the live sequence alone, and what follows it is byte for byte the
  state the window or recurrent part alone gives (``PARTIAL_ONLY``), whose size llama.cpp
  reports; a window parses as an attention section ending where llama.cpp's size says;
- the cells of that range read out as a checkpoint is (``read_range``), whose size the
  shape learnt from it must predict, written back into the emptied live sequence.

The shapes learnt on the way are kept on the context: the window's
(``checked_window_shape``), so that a prefill knows the size of every piece it will read
before its first batch (``SwaRing.piece_bytes``), and the cells' (``checked_cells_shape``),
which sizes the groups of ranges read out together (``range_reads``).

Anything that does not hold is one sentence: the engine then runs the model without
checkpoints (every reply is still written and stored; a switch or a reopen decodes
again), rather than failing on a reply already streamed. The sequence is cleared
afterwards: the context is as it was made.
"""

from __future__ import annotations

import numpy as np

from sessions.llama.context import DecodeError, LlamaContext
from sessions.llama.sequences import LIVE
from sessions.llama.state_blob import FLAGS_FULL, FLAGS_PARTIAL, HEADER, LayoutError, read_header
from sessions.memory_kind import MemoryKind

PROBE_TOKENS = 4
"""Tokens decoded for the check: a cell list of several cells, still a short decode."""


def layout_problem(ctx: LlamaContext, kind: MemoryKind) -> str | None:
    """Why this context's states cannot be checkpointed (None: they parse as expected)."""
    n_vocab = ctx.n_vocab
    tokens = [min(n_vocab - 1, 1 + i) for i in range(PROBE_TOKENS)]
    try:
        ctx.decode(tokens, 0, want_logits=False)
    except DecodeError:
        ctx.clear()
        return None  # not a layout question: the first real decode will say what is wrong
    try:
        _check(ctx, kind, len(tokens))
    except LayoutError as error:
        return f"its saved states are laid out in a way llamachat does not read ({error})"
    finally:
        ctx.clear()
    return None


def _check(ctx: LlamaContext, kind: MemoryKind, count: int) -> None:
    layout = ctx.layout
    full = ctx.state_read(LIVE, FLAGS_FULL)
    if len(full) != ctx.state_size(LIVE, FLAGS_FULL):
        raise LayoutError("llama.cpp wrote another size than it reported")
    if read_header(full) != LIVE:
        raise LayoutError("a state of another sequence")
    if kind is MemoryKind.RECURRENT:
        return  # one recurrent section, kept whole: nothing in it is parsed
    section = layout.read_attention(full, HEADER.size)
    if not np.array_equal(section.positions, np.arange(count)):
        raise LayoutError(f"the cells of {count} tokens read back as positions {section.positions.tolist()}")
    if not np.all(section.cells[:, layout.seq_column] == LIVE):
        raise LayoutError("the cells name another sequence")
    rest = full[section.end :]
    if kind is MemoryKind.PLAIN:
        if len(rest):
            raise LayoutError(f"{len(rest)} bytes follow the attention cells")
    else:
        partial = ctx.state_read(LIVE, FLAGS_PARTIAL)
        if bytes(rest) != bytes(partial[HEADER.size :]):
            raise LayoutError("what follows the attention cells is not the window or recurrent state")
        if kind is MemoryKind.SWA:
            window = layout.read_attention(partial, HEADER.size)
            if window.end != len(partial) or not len(window.positions) or window.positions.max() != count - 1:
                raise LayoutError("the sliding window does not read back as the last tokens' cells")
            ctx.checked_window_shape = layout.shape_of(partial)  # sizes pieces before they are read
    cells = ctx.read_range(0, count)
    shape = layout.shape_of(cells)
    if shape.size(count) != len(cells) or shape.tail != bytes(ctx.cells_tail()):
        raise LayoutError("a checkpoint of the cells is not the size its layout gives")
    ctx.checked_cells_shape = shape  # sizes the groups of a read-out (``range_reads``)
    ctx.clear()
    if not ctx.append_cells(cells):  # (its position bounds are the window's or the recurrent part's)
        raise LayoutError("llama.cpp refused the cells it wrote")
