"""Sliding windows kept as pieces, and restored cell for cell as the uninterrupted run left them.

llama.cpp keeps a sliding-window cache as a ring of ``N`` cells
(``N = pad256(min(n_ctx, n_swa * n_seq_max + n_ubatch))``). Decoding a sequence from
position 0 puts the token at position ``p`` in cell ``p mod N``: the first lap fills
cells in order, and from then on every new token reuses the cell of the token ``N``
positions back, which has long left the window. Cells that left the window stay in the
ring (masked) until that happens.

**Pieces.** The window at a segment boundary is the sliding-layer cells of the last
``n_swa`` tokens. Saved whole at every boundary, each token's cells would be stored once
per boundary that follows it within a window (several times over with short messages).
So what is kept at a boundary is a *piece*: the sliding-layer cells of the segment that
ends there, of its tokens inside that window (``ring_geometry.piece_range``). A token's
cells are then stored once, with its own segment, and the window at any boundary is
the pieces of the segments that end within ``n_swa`` tokens before it, joined
(``SwaRing.lay`` from states in memory, ``SwaRing.piece_into`` for files read straight
into place).

**Exact restores.** The exact bits of the next token depend on the ring's layout:
llama.cpp's flash attention sums over cells in cache order, tile by tile, so the same
window laid out in other cells gives logits that differ in the last bits (measured: up to
4e-3 on the bench model). A restored window must therefore land in the very cells the
uninterrupted run has them in, with the masked cells around it and the search head where
the run left it. Then every later token lands where it would have, and the results are
bit-identical to a plain recompute from token 0; nothing has to be re-laid while the
model runs.

A laid ring (``skeleton``) holds every cell of the ring after ``pos_max``: each piece's
cells go to ``p mod N``, and the masked ones are filler with the positions the run would
have left there (zeros, or the keys and values an earlier restore left in the kept
buffer: they are masked, so no attention reads them, just as the run's own masked cells
hold old keys). Cells are written in index order into an emptied ring, which llama.cpp
fills from cell 0 (``put_window``). The search head then sits after the last cell
written; when the ring has wrapped it must sit after the newest token instead, so the
masked cell there is taken out again (its full-attention twin, which shares its
position, is read first and put back: ``finish``).

The emptied ring starts filling at cell 0 because llama.cpp moves its search head to
the lowest cell a removal frees, and in a ring laid out this way cell 0 is always in use
while the sequence has a window (or the head is already 0): restores fill it, the head
fix never touches it, and a cut that frees it sets the head to 0 itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sessions.branching.errors import RestoreFailed
from sessions.llama.ring_geometry import piece_range, ring_order, ring_positions, ring_runs, ring_size
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
    rows_at: tuple[tuple[int, int], ...] = ()
    """Offset and row size of each layer's rows in ``blob``."""


@dataclass(frozen=True)
class PieceInto:
    """A piece file's state read straight into its cells of a laid ring (``SwaRing.piece_into``).

    ``pieces`` take the file's state in file order: its fields and cell list go to
    ``fixed`` and ``meta``, each layer's rows to the ring cells they belong in (cells of
    positions outside the ring's lap to ``discard``). Once read, ``check`` tells whether
    the file really held that piece.
    """

    pieces: list[memoryview]
    shape: SectionShape
    fixed: np.ndarray
    meta: np.ndarray
    positions: np.ndarray
    """The positions the piece's cells must hold, in file (ring) order."""

    def check(self) -> None:
        """Raise ``LayoutError`` unless the file read held that very piece."""
        layout = self.shape.layout
        meta = layout.cells(self.meta, 0, len(self.positions))
        if self.fixed.tobytes() != self.shape.fixed(len(self.positions)):
            raise LayoutError("a window file of another layout")
        if not np.array_equal(meta[:, 0], self.positions):
            raise LayoutError("the window file does not hold the cells of its place")
        if not (np.all(meta[:, 1] == 1) and np.all(meta[:, layout.seq_column] == LIVE)):
            raise LayoutError("a window of another sequence")


class SwaRing:
    """Window pieces and exact ring restores for the live sequence of one context."""

    def __init__(self, ctx, n_swa: int) -> None:
        self.ctx = ctx
        self.n_swa = n_swa
        self.size = ring_size(ctx.n_ctx, n_swa, ctx.n_seq_max, ctx.n_ubatch)
        self._live_shape: SectionShape | None = None
        """The layout of this context's window states that sizes pieces (``piece_bytes``):
        looked for once. (``window_shape`` is the one file reads are scattered by.)"""
        self._shape_tried = False
        self.window_shape: SectionShape | None = None
        """The layout of window states, once learnt from a file read into the ring (``piece_into``)."""
        self.real_from = 0
        """First position whose window cell holds its real keys and values. A restore fills
        the masked cells before its window with filler (zeros, or what an earlier window
        left): masked, they are never read, but a cut back into them would unmask filler,
        so cuts must stay at or after this."""

    # -- pieces ---------------------------------------------------------------------------

    def window(self) -> np.ndarray | None:
        """The live window as it stands (None when the ring is not in the run's layout)."""
        blob = self.ctx.state_read(LIVE, FLAGS_PARTIAL)
        return blob if self.in_run_order(blob) else None

    def piece(self, start: int, end: int, *, checked: bool = True, once: bool = False) -> np.ndarray | None:
        """The piece of the segment ``[start, end)`` of the live sequence: the sliding-layer
        cells of its tokens inside the window at ``end`` (``piece_range``), as they stood then.

        They are still in the ring until the run overwrites one (``overwritten``): copying
        them to the spare sequence and reading that gives exactly what a read at ``end``
        would have. None when they are gone, or (``checked``) when the ring is not in the
        run's layout. Not ``checked``, for a decode that cannot wait for the check (it reads
        the cells' positions): the caller checks (``in_run_order``) before keeping it.
        ``once``: into the touched buffer asked for ahead (``piece_bytes``, for a decode
        that waits for the read).
        """
        a, b = piece_range(start, end, self.n_swa)
        pos_max = self.ctx.pos_max(LIVE)
        if b - 1 > pos_max or self.overwritten(a, pos_max) or b <= a:
            return None
        if b - 1 == pos_max and a == max(0, b - self.n_swa):
            blob = self.ctx.state_read(LIVE, FLAGS_PARTIAL, once=once)  # the window as it stands
        else:
            self.ctx.seq_cp(LIVE, SPARE, a, b)
            try:
                blob = self.ctx.state_read(SPARE, FLAGS_PARTIAL, once=once)
            finally:
                self.ctx.seq_rm(SPARE)
            self.ctx.layout.relabel(blob, LIVE)  # byte for byte a read of the live sequence then
        if checked and not self.in_run_order(blob):
            return None
        return blob

    def piece_bytes(self, start: int, end: int) -> int | None:
        """The size of the piece of ``[start, end)`` (``piece``), before it is read: from the
        layout of a window state, the layout check's (``LlamaContext.checked_window_shape``)
        or, without one, a one-cell piece of the live sequence read once. None while neither
        is known."""
        shape = self._shape()
        a, b = piece_range(start, end, self.n_swa)
        return shape.size(b - a) if shape is not None and b > a else None

    @property
    def sizes_known(self) -> bool:
        """Whether ``piece_bytes`` answers now (None from now on means a layout not known here)."""
        return self._shape_tried or self.ctx.checked_window_shape is not None

    def _shape(self) -> SectionShape | None:
        if not self._shape_tried:
            if self.ctx.checked_window_shape is not None:
                self._shape_tried, self._live_shape = True, self.ctx.checked_window_shape
            elif self.ctx.pos_max(LIVE) >= 0:
                self._shape_tried, self._live_shape = True, self._learn_shape()
        return self._live_shape

    def _learn_shape(self) -> SectionShape | None:
        last = self.ctx.pos_max(LIVE)
        self.ctx.seq_cp(LIVE, SPARE, last, last + 1)
        try:
            blob = self.ctx.state_read(SPARE, FLAGS_PARTIAL)
        finally:
            self.ctx.seq_rm(SPARE)
        try:
            shape, count = self.ctx.layout.probe_shape(lambda at, n: blob[at : at + n].tobytes(), len(blob))
        except LayoutError:
            return None
        return shape if count == 1 and shape.size(1) == len(blob) else None

    def window_at(self, end: int) -> np.ndarray | None:
        """The whole window as it stood after token ``end - 1`` (checked)."""
        return self.piece(0, end)

    def overwritten(self, first: int, pos_max: int) -> bool:
        """Whether a run up to ``pos_max`` has reused the cell of position ``first``.

        Position ``first`` lives in cell ``first mod N``, which position ``first + N`` is
        the first to reuse. Captures decide by this whether a piece must be read before
        a decode, and reads refuse by it: the two must agree, or a piece left for later
        is found gone.
        """
        return pos_max >= first + self.size

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

    def restore(self, window: Buffer | Sequence[Buffer], pos_max: int) -> None:
        """Make the live ring exactly what an uninterrupted run leaves after ``pos_max``,
        from its window, whole or in pieces.

        The full-attention cells of the live sequence must already be in place (they
        are not touched, except the one put back by the head fix). Raises
        ``LayoutError`` for a window that does not fit, ``RestoreFailed`` when llama.cpp
        refuses the state (the live sequence must then be rebuilt).
        """
        pieces = [window] if isinstance(window, (bytes, bytearray, memoryview, np.ndarray)) else list(window)
        self.write(self.lay(pieces, pos_max))

    def lay(self, pieces: Sequence[Buffer], pos_max: int) -> LaidRing:
        """The ring state an uninterrupted run leaves after ``pos_max``, from window states
        in memory (its pieces, in any order) that hold at least the window.

        No llama.cpp call: a restore lays the ring on a helper thread while the cells
        before it are still being restored (``write`` then puts it in).
        """
        blobs = [as_array(piece) for piece in pieces]
        if not blobs:
            raise LayoutError("no window to restore")
        laid = self.skeleton(pos_max, self.layers_of(blobs[0]))
        covered = []
        for blob in blobs:
            covered.extend(self.lay_into(laid, blob).tolist())
        low = max(0, pos_max - self.n_swa + 1)
        if not set(range(low, pos_max + 1)) <= set(covered):
            raise LayoutError(f"the window pieces do not hold the {pos_max + 1 - low} cells before position "
                              f"{pos_max + 1}")
        return laid

    def layers_of(self, blob: np.ndarray) -> Layers:
        """The layers of a window state (``LayoutError`` for one with no cells)."""
        read_header(blob)
        section = self.ctx.layout.read_attention(blob, HEADER.size)
        if not len(section.positions):
            raise LayoutError("a window state with no cells")
        return tuple((kind, row) for kind, row, _rows in section.layers)

    def lay_into(self, laid: LaidRing, blob: np.ndarray) -> np.ndarray:
        """Copy the cells of a window state (a piece, or a whole window) into their ring
        cells of ``laid``; returns the positions it held. Only the window's cells are
        copied: those of an older piece before the window would land on masked filler,
        or, a lap back, on the window's own cells."""
        read_header(blob)
        section = self.ctx.layout.read_attention(blob, HEADER.size)
        if tuple(row for _kind, row, _rows in section.layers) != tuple(row for _at, row in laid.rows_at):
            raise LayoutError("window pieces of different layouts")
        positions = section.positions
        keep = np.flatnonzero((positions >= laid.real_from) & (positions <= laid.pos_max))
        slots = positions[keep].astype(np.int64) % self.size
        for (_k, _r, src), (offset, row) in zip(section.layers, laid.rows_at, strict=True):
            dst = laid.blob[offset : offset + row * laid.cells].reshape(laid.cells, row)
            dst[slots] = src[keep]
        self._keep_cell_fields(laid, slots, section.cells[keep])
        return positions

    def check_covered(self, pos_max: int, parts: Sequence[tuple[int, int]]) -> None:
        """Raise ``LayoutError`` unless the pieces of these segments hold the whole window
        after ``pos_max`` (the planner asks for them so; a chat cut into other segments
        may have left pieces of other ranges under the same names)."""
        low = max(0, pos_max - self.n_swa + 1)
        ranges = sorted(piece_range(start, end, self.n_swa) for start, end in parts)
        reach = low
        for a, b in ranges:
            if a > reach:
                break
            reach = max(reach, b)
        if reach < pos_max + 1:
            raise LayoutError(f"the window pieces do not reach back to position {low}")

    def piece_into(self, laid: LaidRing, state_len: int, start: int, end: int,
                   read_at: Callable[[int, int], bytes]) -> PieceInto | None:
        """Where to read a piece file's state (the piece of the segment ``[start, end)``)
        so that its rows land in their cells of ``laid``.

        ``state_len`` is the file's state size and ``read_at(offset, n)`` reads its state,
        for learning the layout once. None when the state is not that piece in a layout
        known here (or of the ring's own layers): the caller then reads it whole and lays
        it (``lay``).
        """
        a, b = piece_range(start, end, self.n_swa)
        positions = ring_order(a, b, self.size)
        count = len(positions)
        shape = self.window_shape or self.probe(state_len, read_at, count)
        if shape is None or shape.size(count) != state_len or tuple(row for _k, row in shape.layers) != tuple(
                row for _o, row in laid.rows_at):
            return None
        fixed = np.empty(len(shape.fixed(count)), dtype=np.uint8)
        meta = np.empty(shape.layout.cell_bytes * count, dtype=np.uint8)
        ring, fields = laid.blob.data, fixed.data  # memoryview slices: a fifth of numpy views' cost
        pieces = [fields[:16], meta.data, fields[16:24]]
        at = 24
        runs = self._split_runs(ring_runs(a, b, self.size), positions, laid.real_from)
        for offset, row in laid.rows_at:
            pieces.append(fields[at : at + 12])
            at += 12
            for lo, hi, slot in runs:
                if slot >= 0:
                    pieces.append(ring[offset + row * slot : offset + row * (slot + hi - lo)])
                else:  # cells before the window: read past, as ``lay_into`` leaves them out
                    pieces.append(memoryview(bytearray(row * (hi - lo))))
        return PieceInto(pieces, shape, fixed, meta, positions)

    @staticmethod
    def _split_runs(runs: list[tuple[int, int, int]], positions: np.ndarray,
                    low: int) -> list[tuple[int, int, int]]:
        """``runs`` with the cells of positions before ``low`` apart, their slot -1."""
        out = []
        for lo, hi, slot in runs:
            cut = lo + int(np.count_nonzero(positions[lo:hi] < low))  # a run's positions rise
            if cut > lo:
                out.append((lo, cut, -1))
            if hi > cut:
                out.append((cut, hi, slot + cut - lo))
        return out

    def probe(self, state_len: int, read_at: Callable[[int, int], bytes], count: int) -> SectionShape | None:
        """The layout of a window state of ``count`` cells, from a few small reads (None: not one)."""
        try:
            shape, probed = self.ctx.layout.probe_shape(read_at, state_len)
        except LayoutError:
            return None
        if probed != count or shape.tail or shape.seq != LIVE:
            return None
        return shape

    def placed(self, laid: LaidRing, reads: Sequence[PieceInto]) -> LaidRing:
        """The ring the piece files were read into (``piece_into``), once their checksums passed.

        Raises ``LayoutError`` unless every file held the piece of its place; a layout
        learnt from them is kept only then (a damaged first file spoils nothing after).
        """
        for read in reads:
            read.check()
        if reads:
            self.window_shape = reads[0].shape
            layout = reads[0].shape.layout
            if layout.cell_ext:
                for read in reads:
                    slots = read.positions.astype(np.int64) % self.size
                    inside = read.positions >= laid.real_from
                    self._keep_cell_fields(laid, slots[inside], layout.cells(read.meta, 0, len(read.positions))[inside])
        return laid

    def _keep_cell_fields(self, laid: LaidRing, slots: np.ndarray, cells: np.ndarray) -> None:
        """Give the window's cells of a laid ring the fields they were saved with.

        The ring's cell list is written from positions alone (``skeleton``); a model
        whose cells carry more than a position (``StateLayout.cell_ext``: a 2D position
        and the cell's token) gets its window cells' own fields back here. The masked
        cells keep zeros there: no attention reads them.
        """
        layout = self.ctx.layout
        if not layout.cell_ext or not len(slots):
            return
        ring = layout.cells(laid.blob, HEADER.size + 8, laid.cells)
        ring[slots, 2 : layout.seq_column] = cells[:, 2 : layout.seq_column]

    def skeleton(self, pos_max: int, layers: Layers) -> LaidRing:
        """The kept ring buffer with the fields and cells of the ring after ``pos_max``,
        its rows as the last user left them, and where each layer's rows are.

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
        return LaidRing(ring, pos_max, real_from, count, tuple(layout.rows_offsets(layers, count)))

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

    def reused_by(self, end: int) -> bool:
        """Whether a run to ``end`` (exclusive) has put a position in a cell an earlier one
        had: only then does cutting positions away leave the ring unlike the uninterrupted
        run's (``relay``)."""
        return end > self.size

    def relay(self) -> None:
        """After a cut: lay the ring out as an uninterrupted run to the new end has it.

        Needed only when the positions cut away had reused cells (``reused_by``): a cut
        leaves their cells empty where the run keeps the older, masked positions, and the
        next tokens then come out other in their last bits. It reads the window and writes
        the whole ring.
        """
        pos_max = self.ctx.pos_max(LIVE)
        if pos_max < 0:
            return
        blob = self.ctx.state_read(LIVE, FLAGS_PARTIAL)
        self.restore(blob, pos_max)

