"""Sliding-window caches restored cell for cell as the uninterrupted run left them.

llama.cpp keeps a sliding-window cache as a ring of ``N`` cells
(``N = pad256(min(n_ctx, n_swa * n_seq_max + n_ubatch))``). Decoding a sequence from
position 0 puts the token at position ``p`` in cell ``p mod N``: the first lap fills
cells in order, and from then on every new token reuses the cell of the token ``N``
positions back, which has long left the window. Cells that left the window stay in the
ring (masked) until that happens.

The exact bits of the next token depend on that layout: llama.cpp's flash attention
sums over cells in cache order, tile by tile, so the same window laid out in other cells
gives logits that differ in the last bits (measured: up to 4e-3 on the bench model). A
restored window must therefore land in the very cells the uninterrupted run has them
in, with the masked cells around it and the search head where the run left it. Then
every later token lands where it would have, and the results are bit-identical to a
plain recompute from token 0; nothing has to be re-laid while the model runs.

``restore`` builds that ring from a window snapshot (the unmasked cells only, as
``LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY`` writes them): each visible cell goes to ``p mod N``,
the masked ones are filler with the positions the run would have left there (zeros, or
the keys and values an earlier restore left in the kept buffer: they are masked, so no
attention reads them, just as the run's own masked cells hold old keys), and cells are
written in index order into an emptied ring, which llama.cpp fills from cell 0. ``lay``
builds the ring (on any thread), ``put_window`` and ``finish`` put it in. The search head then sits after the
last cell written; when the ring has wrapped it must sit after the newest token instead,
so the masked cell there is taken out again (its full-attention twin, which shares its
position, is read first and put back).

The emptied ring starts filling at cell 0 because llama.cpp moves its search head to
the lowest cell a removal frees, and in a ring laid out this way cell 0 is always in use
while the sequence has a window (or the head is already 0): restores fill it, the head
fix never touches it, and a cut that frees it sets the head to 0 itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sessions.branching.errors import RestoreFailed
from sessions.llama.ring_geometry import cell_runs, ring_positions, ring_size, window_positions, window_runs
from sessions.llama.sequences import LIVE, SPARE
from sessions.llama.state_blob import (
    FLAGS_FULL,
    FLAGS_PARTIAL,
    HEADER,
    STATE_MAGIC,
    Buffer,
    Layers,
    LayoutError,
    SectionShape,
    as_array,
    read_header,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LaidRing:
    """A ring state ready for llama.cpp (``SwaRing.lay``), and what writing it implies."""

    blob: np.ndarray
    pos_max: int
    real_from: int
    """The first position whose cell holds real keys and values (``SwaRing.real_from``)."""
    cells: int
    """Cells written: the ring's size once it has wrapped."""


@dataclass(frozen=True)
class WindowInto:
    """A window state read straight into its cells of the ring (``SwaRing.into``).

    ``pieces`` take a window file's state in file order: its fields and cell list go to
    ``fixed`` and ``meta``, each layer's rows to the ring cells they belong in. Once
    read, ``check`` tells whether the file really held that window.
    """

    laid: LaidRing
    pieces: list[memoryview]
    shape: SectionShape
    fixed: np.ndarray
    meta: np.ndarray
    positions: np.ndarray
    """The positions the window's cells must hold, in file (ring) order."""

    def check(self) -> None:
        """Raise ``LayoutError`` unless the file read held that very window."""
        layout = self.shape.layout
        meta = layout.cells(self.meta, 0, len(self.positions))
        if self.fixed.tobytes() != self.shape.fixed(len(self.positions)):
            raise LayoutError("a window file of another layout")
        if not np.array_equal(meta[:, 0], self.positions):
            raise LayoutError("the window file does not hold the window of its place")
        if not (np.all(meta[:, 1] == 1) and np.all(meta[:, layout.seq_column] == LIVE)):
            raise LayoutError("a window of another sequence")


class SwaRing:
    """Window snapshots and exact ring restores for the live sequence of one context."""

    def __init__(self, ctx, n_swa: int) -> None:
        self.ctx = ctx
        self.n_swa = n_swa
        self.size = ring_size(ctx.n_ctx, n_swa, ctx.n_seq_max, ctx.n_ubatch)
        self.window_bytes: int | None = None
        """Size of a whole window's state (``n_swa`` cells), once one was read: the same
        for every whole window, so later reads need not have llama.cpp measure it."""
        self.window_shape: SectionShape | None = None
        """The layout of window states, once learnt from a file read into the ring (``into``)."""
        self.real_from = 0
        """First position whose window cell holds its real keys and values. A restore fills
        the masked cells before its window with filler (zeros, or what an earlier window
        left): masked, they are never read, but a cut back into them would unmask filler,
        so cuts must stay at or after this."""

    # -- snapshots ------------------------------------------------------------------------

    def window(self) -> np.ndarray | None:
        """The live window as it stands (None when the ring is not in the run's layout)."""
        blob = self.ctx.state_read(LIVE, FLAGS_PARTIAL, warm=True)
        return blob if self.in_run_order(blob) else None

    def window_at(self, end: int) -> np.ndarray | None:
        """The window as it stood after token ``end - 1`` of the live sequence.

        Its cells are still in the ring until the run overwrites one (``overwritten``):
        copying them to the spare sequence and reading that gives exactly the snapshot
        that would have been taken then. None when they are gone, or when the ring is not
        in the run's layout.
        """
        blob = self.unchecked_window_at(end)
        return blob if blob is not None and self.in_run_order(blob) else None

    def unchecked_window_at(self, end: int) -> np.ndarray | None:
        """``window_at`` less the layout check of the live window, for a decode that
        cannot wait for it: the caller checks (``in_run_order``) before keeping it.

        In a prefill this read stands between two ``llama_decode`` calls, and the check
        (which reads the window's cells) took a fifth of its time: 0.15 of 0.75 ms per
        window on the development VM, where budget 1 of the branching benchmark allows
        about 1 ms per window in all.
        """
        pos_max = self.ctx.pos_max(LIVE)
        if end - 1 > pos_max or self.overwritten(end, pos_max):
            return None
        whole = end >= self.n_swa
        size = self.window_bytes if whole else None
        if end - 1 == pos_max:
            blob = self.ctx.state_read(LIVE, FLAGS_PARTIAL, warm=True, size=size)
        else:
            self.ctx.seq_cp(LIVE, SPARE, max(0, end - self.n_swa), end)
            try:
                blob = self.ctx.state_read(SPARE, FLAGS_PARTIAL, warm=True, size=size)
            finally:
                self.ctx.seq_rm(SPARE)
            if not self.in_run_order(blob):  # relabelling needs the layout understood
                return None
            self.ctx.layout.relabel(blob, LIVE)  # byte for byte the snapshot taken back then
        if whole:
            self.window_bytes = len(blob)
        return blob

    def overwritten(self, end: int, pos_max: int) -> bool:
        """Whether a run up to ``pos_max`` has reused a cell of the window at ``end``.

        That window is positions ``end - n_swa .. end - 1``; the oldest lives in cell
        ``(end - n_swa) mod N``, which position ``end - n_swa + N`` is the first to reuse.
        So the window is whole while at most ``N - n_swa`` tokens came after it. (A window
        shorter than ``n_swa``, near the start, would last longer: it is counted as a
        whole one, which errs on the safe side.) Captures decide by this whether a window
        must be read before a decode, and reads refuse by it: the two must agree, or a
        window left for later is found gone.
        """
        return pos_max >= end - self.n_swa + self.size

    def in_run_order(self, blob: np.ndarray) -> bool:
        """Whether a window state holds its cells in the ring order of an uninterrupted run."""
        try:
            read_header(blob)
            positions = self.ctx.layout.read_positions(blob, HEADER.size)
        except LayoutError as error:
            log.warning("sliding-window state not understood (%s); windows are not saved", error)
            return False
        cells = positions.astype(np.int64) % self.size
        return bool(np.all(np.diff(cells) > 0))

    # -- restoring ------------------------------------------------------------------------

    def restore(self, window: Buffer, pos_max: int) -> None:
        """Make the live ring exactly what an uninterrupted run leaves after ``pos_max``.

        The full-attention cells of the live sequence must already be in place (they
        are not touched, except the one put back by the head fix). Raises
        ``LayoutError`` for a window that does not fit, ``RestoreFailed`` when llama.cpp
        refuses the state (the live sequence must then be rebuilt).
        """
        self.write(self.lay(window, pos_max))

    def lay(self, window: Buffer, pos_max: int) -> LaidRing:
        """The ring state an uninterrupted run leaves after ``pos_max``, from its window.

        No llama.cpp call: a restore lays the ring on a helper thread while the cells
        before it are still being restored (``write`` then puts it in).
        """
        window = as_array(window)
        read_header(window)
        section = self.ctx.layout.read_attention(window, HEADER.size)
        expected = window_positions(pos_max, self.n_swa, self.size)
        if not np.array_equal(np.sort(section.positions), np.sort(expected)):
            raise LayoutError(f"the window does not hold the {len(expected)} cells before position {pos_max + 1}")
        laid, rows_at = self._skeleton(pos_max, tuple((kind, row) for kind, row, _rows in section.layers))
        slots = section.positions.astype(np.int64) % self.size  # cell by cell, in the window's order
        self._keep_cell_fields(laid, slots, section.cells)
        for (_k, _r, src), (offset, row) in zip(section.layers, rows_at, strict=True):
            dst = laid.blob[offset : offset + row * laid.cells].reshape(laid.cells, row)
            for lo, hi, slot in cell_runs(slots):
                dst[slot : slot + hi - lo] = src[lo:hi]
        return laid

    def into(self, state_len: int, pos_max: int, read_at: Callable[[int, int], bytes]) -> WindowInto | None:
        """Where to read a window file's state so that it lands laid out as the ring.

        ``lay`` copies a window read whole into the ring; this spares that copy (and
        the window's own buffer): the file's rows are read straight into their ring
        cells with one scatter read. ``state_len`` is the file's state size and
        ``read_at(offset, n)`` reads its state, for learning the layout once. None
        when the state is not the window of ``pos_max`` in a layout known here: the
        caller then reads it whole and lays it. Once read and its checksum passed,
        ``laid_from`` gives the ring.
        """
        positions = window_positions(pos_max, self.n_swa, self.size)
        count = len(positions)
        shape = self.window_shape
        if shape is None:
            try:
                shape, probed = self.ctx.layout.probe_shape(read_at, state_len)
            except LayoutError:
                return None
            if probed != count or shape.tail or shape.seq != LIVE:
                return None
        if shape.size(count) != state_len:
            return None
        laid, rows_at = self._skeleton(pos_max, shape.layers)
        fixed = np.empty(len(shape.fixed(count)), dtype=np.uint8)
        meta = np.empty(shape.layout.cell_bytes * count, dtype=np.uint8)
        runs = window_runs(pos_max, self.n_swa, self.size)
        ring, fields = laid.blob.data, fixed.data  # memoryview slices: a fifth of numpy views' cost
        pieces = [fields[:16], meta.data, fields[16:24]]
        at = 24
        for offset, row in rows_at:
            pieces.append(fields[at : at + 12])
            at += 12
            pieces += [ring[offset + row * slot : offset + row * (slot + hi - lo)] for lo, hi, slot in runs]
        return WindowInto(laid, pieces, shape, fixed, meta, positions)

    def laid_from(self, read: WindowInto) -> LaidRing:
        """The ring a window file was read into (``into``), once its checksum passed.

        Raises ``LayoutError`` unless the file held the window of its place; a layout
        learnt from it is kept only then (a damaged first file spoils nothing after).
        """
        read.check()
        self.window_shape = read.shape
        layout = read.shape.layout
        if layout.cell_ext:
            cells = layout.cells(read.meta, 0, len(read.positions))
            self._keep_cell_fields(read.laid, read.positions.astype(np.int64) % self.size, cells)
        return read.laid

    def _keep_cell_fields(self, laid: LaidRing, slots: np.ndarray, cells: np.ndarray) -> None:
        """Give the window's cells of a laid ring the fields they were saved with.

        The ring's cell list is written from positions alone (``_skeleton``); a model
        whose cells carry more than a position (``StateLayout.cell_ext``: a 2D position
        and the cell's token) gets its window cells' own fields back here. The masked
        cells keep zeros there: no attention reads them.
        """
        layout = self.ctx.layout
        if not layout.cell_ext:
            return
        ring = layout.cells(laid.blob, HEADER.size + 8, laid.cells)
        ring[slots, 2 : layout.seq_column] = cells[:, 2 : layout.seq_column]

    def _skeleton(self, pos_max: int, layers: Layers) -> tuple[LaidRing, list[tuple[int, int]]]:
        """The kept ring buffer with the fields and cells of the ring after ``pos_max``,
        its rows as the last user left them; and the offset and row size of each
        layer's rows there.

        Kept between restores: the masked cells keep what an earlier window left there,
        real keys and values that no attention reads, as in the uninterrupted run.
        """
        positions = ring_positions(pos_max, self.size)
        count = len(positions)
        rows = [(kind, row, None) for kind, row in layers]
        layout = self.ctx.layout
        ring = self.ctx.restore_memory.get("ring", HEADER.size + layout.attention_bytes(count, rows))
        HEADER.pack_into(ring.data, 0, STATE_MAGIC, LIVE)
        layout.write_attention(ring, HEADER.size, LIVE, positions, rows)
        real_from = max(0, pos_max - self.n_swa + 1)
        return LaidRing(ring, pos_max, real_from, count), layout.rows_offsets(layers, count)

    def write(self, laid: LaidRing) -> None:
        """Put a laid-out ring into the live sequence (see ``restore``)."""
        self.put_window(laid)
        self.finish(laid)

    def put_window(self, laid: LaidRing) -> None:
        """The first half of ``write``: the window cache only.

        It does not touch the full-attention cells, so a restore puts it in while the
        cells before it still arrive; ``finish`` follows once they are all in.
        """
        self.real_from = laid.real_from
        if not self.ctx.state_write(laid.blob, LIVE, FLAGS_PARTIAL):
            raise RestoreFailed("llama.cpp refused the sliding-window state")

    def finish(self, laid: LaidRing) -> None:
        """The second half of ``write``, with every full-attention cell in place: the head."""
        self._fix_head(laid.pos_max, laid.cells)

    def _fix_head(self, pos_max: int, written: int) -> None:
        """Put the search head after the newest token, as the uninterrupted run has it."""
        head = pos_max % self.size + 1
        if written < self.size or head == self.size:
            return  # the ring has not wrapped: the head is already after the last cell
        oldest = pos_max + 1 - self.size  # the masked cell the next token will reuse
        ctx = self.ctx
        ctx.seq_cp(LIVE, SPARE, oldest, oldest + 1)
        try:
            twin = ctx.state_read(SPARE, FLAGS_FULL)
        finally:
            ctx.seq_rm(SPARE)
        only_base = ctx.cells_only(twin)
        if not np.array_equal(ctx.layout.read_attention(only_base, HEADER.size).positions, [oldest]):
            raise LayoutError(f"position {oldest} is not in the full-attention cache")
        ctx.seq_rm(LIVE, oldest, oldest + 1)
        if not ctx.state_write(only_base, SPARE, FLAGS_FULL):
            ctx.seq_rm(SPARE)
            raise RestoreFailed("llama.cpp refused to put a full-attention cell back")
        ctx.seq_cp(SPARE, LIVE)
        ctx.seq_rm(SPARE)

    def relay(self) -> None:
        """After a cut: lay the ring out as an uninterrupted run to the new end has it."""
        pos_max = self.ctx.pos_max(LIVE)
        if pos_max < 0:
            return
        blob = self.ctx.state_read(LIVE, FLAGS_PARTIAL)
        self.restore(blob, pos_max)

