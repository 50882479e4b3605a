"""Checkpoints read beside the restore, straight into the states llama.cpp restores from.

A branch's cells come back in batches of consecutive ranges, one llama.cpp call per batch
(each call costs a sequence copy and a cache scan, so joining ranges pays). A batch is
laid out once in a buffer kept for restores (``RestoreMemory``), and each file is read
into its place there with one scatter read, its checksum taken over the pieces: no
buffer per file, no join copy, no new memory to map. Ranges still in RAM are copied in.

The thread that restores reads the first batch itself while a helper thread reads the
snapshot; then the helper reads the other batches, each into a join buffer of its own,
while the restoring thread hands what was read to llama.cpp (reading a file, checking it
and copying release the GIL). The snapshot is read first so that llama.cpp's copy of it
(a sliding window's ring is the largest single state of a restore) starts as soon as the
first batch is in, and overlaps the reading of the rest. A sliding window, made of the
pieces of the segments before it, is read piece by piece straight into its cells of the
ring llama.cpp takes (``SwaRing.piece_into``): no copy of it either. A range that is
missing, corrupt or of another layout ends its batch there: the batch then holds the
ranges before it, and the restore stops after it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sessions.checkpoints import Place, Placed, Segment, StateSpan, StoreClosedError
from sessions.llama.ring_geometry import piece_range, ring_bytes, ring_size
from sessions.llama.sequences import LIVE, SEQUENCES
from sessions.llama.state_blob import HEADER, JoinedCells, LayoutError, SectionShape, as_array
from sessions.memory_kind import MemoryKind

if TYPE_CHECKING:
    from sessions.branching.live import Engine
    from sessions.branching.planner import SegmentInfo
    from sessions.branching.swa_ring import LaidRing, PieceInto, SwaRing
    from sessions.checkpoints import CheckpointStore
    from sessions.llama.context import ContextParams
    from sessions.llama.model import ModelInfo

log = logging.getLogger(__name__)

ReadAt = Callable[[int, int], bytes]
"""How a ``place`` reads bytes of the file at an offset (``checkpoints.Place``)."""

BATCH_BYTES = 2 << 20
"""Bytes of cells per llama.cpp call: enough that the per-call costs vanish, few enough
that the first batch is read soon and the reading overlaps the copying."""
JOIN_BUFFERS = 3
"""Batches in memory at once: the one llama.cpp is copying, the one the helper reads, and
one more, so that the helper goes on reading while llama.cpp copies the snapshot in. (The
orders of reading measured before this one: ``docs/benchmarks.md``, "What the engine's
choices rest on".)"""


@dataclass(frozen=True)
class CellsRead:
    """One batch of consecutive ranges, read and joined."""

    start: int
    end: int
    """Tokens covered; ``end == start`` when not even the first range could be read."""
    blob: np.ndarray | None
    nbytes: int
    """Payload bytes read."""
    complete: bool
    """False when a range was missing or failed its checks (the batch stops before it)."""


@dataclass(frozen=True)
class SnapshotRead:
    """A snapshot read for a restore, from RAM or from disk into the restore buffer."""

    state: np.ndarray
    logits: np.ndarray | None
    nbytes: int
    ring: LaidRing | None
    """A sliding window laid out as the live ring: read into it from disk
    (``SwaRing.piece_into``), or laid from pieces in RAM; ``state`` is then that ring."""


def disk_sizes(store: CheckpointStore, model_fingerprint: str) -> dict[str, int]:
    """The join buffers a restore of the model's cells on disk fills (``RestoreMemory``).

    Known from the fingerprint alone, so touched while the model loads; what the
    snapshot goes into depends on the model's memory (``snapshot_sizes``)."""
    cells = store.largest(model_fingerprint, "cells")
    return {f"join{i}": BATCH_BYTES + cells for i in range(JOIN_BUFFERS)} if cells else {}


def snapshot_sizes(store: CheckpointStore, info: ModelInfo, params: ContextParams) -> dict[str, int]:
    """The buffer a restore reads the model's snapshots into: the ring (as a context of
    ``params`` will have it) for a sliding window, which ``SwaRing.into`` reads there;
    else a buffer of the largest snapshot."""
    largest = store.largest(info.fingerprint, "snapshot")
    if info.kind is MemoryKind.SWA:
        cells = ring_size(params.n_ctx, info.n_swa, SEQUENCES, params.n_batch)
        return {"ring": ring_bytes(largest, cells, info.n_swa)}
    return {"snapshot": largest}


LEARN_FROM_AT_MOST = 64 << 20
"""Largest file ``learn_layouts`` reads. A large model's window file is hundreds of MB
(a 27B Gemma 3's 1,024-token window, about 400 MB): reading one at load would cost far
more than the few small reads a restore then spends learning the layout itself."""


def learn_layouts(engine: Engine) -> None:
    """Learn the layouts of the model's cells and window states from a file of each.

    A restore learns them from the first file it reads otherwise, with a dozen small
    reads before that file's read (the window's one per layer) on the way to the first
    token. Run on the reader thread as soon as the context exists (the layouts depend on
    its settings), while the chat opens, it takes the smallest file of each kind (up to
    ``LEARN_FROM_AT_MOST``), whole and verified: a layout is only ever learnt from a file
    that proved intact.
    """
    store, ring = engine.store, engine.seq.ring
    if store is None:
        return
    try:
        cells = store.sample(engine.compat, "cells", LEARN_FROM_AT_MOST) if engine.seq.cells_shape is None else None
        if cells is not None:
            shape = engine.ctx.layout.shape_of(as_array(cells.state))
            if shape.tail == bytes(engine.ctx.cells_tail()):
                engine.seq.cells_shape = shape
        if ring is not None and ring.window_shape is None:
            window = store.sample(engine.compat, "snapshot", LEARN_FROM_AT_MOST)
            if window is not None and len(window.state):
                shape = engine.ctx.layout.shape_of(as_array(window.state))
                if not shape.tail and shape.seq == LIVE:
                    ring.window_shape = shape
                    # The ring a restore lays, sized exactly (the estimate at load, from the
                    # largest piece, falls short when pieces are short).
                    exact = HEADER.size + engine.ctx.layout.attention_bytes(ring.size, shape.layers)
                    engine.ctx.restore_memory.prepare(lambda: {"ring": exact})
    except (LayoutError, StoreClosedError) as error:  # the first restore learns them itself
        log.debug("state layouts not learnt ahead: %s", error)


def group_batches(infos: Sequence[SegmentInfo], limit: int | None = None) -> list[list[int]]:
    """Indexes of ``infos`` grouped into consecutive batches of about ``limit`` bytes."""
    limit = BATCH_BYTES if limit is None else limit
    out: list[list[int]] = []
    size = limit
    for index, info in enumerate(infos):
        if size >= limit:
            out.append([])
            size = 0
        out[-1].append(index)
        size += info.nbytes
    return out


class RestoreReads:
    """The reads of one restore, in the order the restoring thread wants them: ``cells()``
    yields the batches in order (reading the first itself), ``snapshot()`` waits for the
    snapshot at their end, which the helper reads while the first batch is read."""

    def __init__(
        self, engine: Engine, infos: Sequence[SegmentInfo], prefixes: Sequence[str],
        snapshot: tuple[int, Sequence[tuple[str, int, int]]] | None,
    ) -> None:
        """``snapshot``: the end of the snapshot to restore after the cells, and what it is
        made of: ``(prefix, start, end)`` of each part, newest first (a sliding window's
        pieces; else the one snapshot at the end)."""
        self._engine = engine
        self._infos, self._prefixes = infos, prefixes
        self._groups = group_batches(infos)
        store = engine.store
        self._pool = engine.ctx.restore_memory.reader() if store is not None else None
        self._cells: list[Future[CellsRead]] = []
        """Batches 1, 2, ... as the helper reads them (the restoring thread reads batch 0)."""
        self._snapshot: Future[SnapshotRead | None] | None = None
        if self._pool is not None and snapshot is not None:
            end, parts = snapshot
            if engine.seq.ring is not None:
                self._snapshot = self._pool.submit(self._read_window, end, parts)
            else:
                self._snapshot = self._pool.submit(self._read_snapshot, parts[0][0])
        for _ in range(JOIN_BUFFERS - 1):
            self._submit_next()

    def _submit_next(self) -> None:
        index = len(self._cells) + 1
        if self._pool is not None and index < len(self._groups):
            self._cells.append(self._pool.submit(self._read_batch, index))

    def cells(self) -> Iterator[CellsRead]:
        """The batches in order; a batch's buffer is reused once the caller asks for the next.

        The first is read here, on the restoring thread, while the helper reads the
        snapshot: the restoring thread has nothing else to do until a batch is in, and
        the helper, which reads everything after, is what a restore waits for."""
        if self._pool is None or not self._groups:
            return
        yield self._read_batch(0)
        self._submit_next()  # the buffer of batch 0 is free again
        for future in self._cells:  # grows while it is walked: one more batch per batch taken
            yield future.result()
            self._submit_next()

    def snapshot(self) -> SnapshotRead | None:
        """The snapshot asked for (None when missing or failed its checks), once read."""
        return self._snapshot.result() if self._snapshot is not None else None

    def close(self) -> None:
        """Stop reading: reads the helper has not begun are dropped, and one under way is
        waited for (it writes into the restore buffers)."""
        asked: list[Future] = [*self._cells, *([self._snapshot] if self._snapshot is not None else [])]
        wait([future for future in asked if not future.cancel()])

    # -- the reads --------------------------------------------------------------------------

    def _read_batch(self, index: int) -> CellsRead:
        engine = self._engine
        store = engine.store
        assert store is not None
        group = [self._infos[i] for i in self._groups[index]]
        placer = CellsPlacer(engine, f"join{index % JOIN_BUFFERS}", sum(info.end - info.start for info in group))
        for i, info in zip(self._groups[index], group, strict=True):
            try:
                got = store.read_into(engine.compat, self._prefixes[i], "cells", placer.range(info.start, info.end))
                if got is None or not placer.took(got):
                    break
            except LayoutError:
                break
        return placer.finish(group[0].start)

    def _read_snapshot(self, prefix: str) -> SnapshotRead | None:
        """A recurrent state or a plain model's logits, read into the snapshot buffer."""
        engine = self._engine
        assert engine.store is not None
        buffer: list[np.ndarray] = []

        def place(span: StateSpan, read_at: ReadAt) -> list[memoryview]:
            buffer.clear()  # asked again when the first read of the file fell through
            buffer.append(engine.ctx.restore_memory.get("snapshot", span.state_len))
            return [buffer[0].data]

        got = engine.store.read_into(engine.compat, prefix, "snapshot", place)
        if got is None:
            return None
        if isinstance(got, Placed):
            return SnapshotRead(buffer[0], got.logits, got.nbytes, None)
        logits = as_array(got.logits) if got.logits is not None else None
        return SnapshotRead(as_array(got.state), logits, got.nbytes, None)

    def _read_window(self, end: int, parts: Sequence[tuple[str, int, int]]) -> SnapshotRead | None:
        """The window at ``end`` from its pieces, laid out as the live ring: each file read
        straight into its cells (``SwaRing.piece_into``), a piece in RAM copied there.

        None when a piece is missing or fails its checks; a damaged file's bytes must not
        stay on as masked filler, so the ring buffer is then dropped.
        """
        engine, ring = self._engine, self._engine.seq.ring
        assert engine.store is not None and ring is not None
        placer = WindowPlacer(ring, end - 1)
        nbytes, logits = 0, None
        try:
            for index, (prefix, start, part_end) in enumerate(parts):
                got = engine.store.read_into(engine.compat, prefix, "snapshot", placer.piece(start, part_end))
                if got is None:
                    self._drop(placer)
                    return None
                if isinstance(got, Placed):
                    placer.read()
                else:
                    placer.lay(as_array(got.state))
                nbytes += got.nbytes
                if index == 0 and got.logits is not None:
                    logits = as_array(got.logits)
            laid = placer.finish([(start, part_end) for _prefix, start, part_end in parts])
        except LayoutError as error:
            log.warning("window at %d not used: %s", end, error)
            self._drop(placer)
            return None
        return SnapshotRead(laid.blob, logits, nbytes, laid)

    def _drop(self, placer: WindowPlacer) -> None:
        if placer.laid is not None:
            self._engine.ctx.restore_memory.drop("ring")


class CellsPlacer:
    """Where the ranges of one batch go: into one join buffer, laid out once from the first
    range's layout (``JoinedCells``), each file straight into its cells, each range held in
    RAM copied there. A layout learnt from a file (none known yet) is kept once the file
    proves whole."""

    def __init__(self, engine: Engine, buffer: str, count: int) -> None:
        self.engine, self.buffer, self.count = engine, buffer, count
        """``buffer``: the restore memory's join buffer; ``count``: the batch's tokens."""
        self.joined: JoinedCells | None = None
        self.at = 0
        """Tokens placed so far (where the next range goes)."""
        self.nbytes = 0
        """Payload bytes read so far."""
        self._range = (0, 0)
        self._scratch: np.ndarray | None = None
        """The fixed fields of the file being read (checked against the buffer's layout)."""
        self._probed: SectionShape | None = None
        """A layout learnt from the file being read: kept once it proves whole."""

    def range(self, start: int, end: int) -> Place:
        """The ``place`` of the store's ``read_into`` for the cells of ``[start, end)``."""
        self._range = (start, end)
        self._scratch = self._probed = None
        return self._place

    def _join(self, shape: SectionShape) -> JoinedCells:
        if self.joined is None:
            memory = self.engine.ctx.restore_memory.get(self.buffer, shape.size(self.count))
            self.joined = JoinedCells(shape, self.count, memory)
        return self.joined

    def _place(self, span: StateSpan, read_at: ReadAt) -> list[memoryview] | None:
        self._scratch = self._probed = None  # asked again when the first read of the file fell through
        start, end = self._range
        if (span.start, span.end) != (start, end):
            return None
        ctx, cells = self.engine.ctx, end - start
        shape = self.engine.seq.cells_shape
        if shape is None:  # learnt from this file, kept once the file proves whole
            try:
                shape, _count = ctx.layout.probe_shape(read_at, span.state_len)
            except LayoutError:
                return None
            if shape.tail != bytes(ctx.cells_tail()):
                return None  # the other memory parts hold cells: not a cells-only state
            self._probed = shape
        if shape.size(cells) != span.state_len:
            return None
        self._scratch = np.empty(len(shape.fixed(cells)), dtype=np.uint8)
        return self._join(shape).pieces(self.at, cells, self._scratch)

    def took(self, got: Segment | Placed) -> bool:
        """What the store gave for the range last asked for: read from its file into the
        buffer (its fixed fields are checked, ``LayoutError``, and a layout learnt from it
        is kept), or held in RAM (copied in). False when it cannot be used: not the range
        asked for, or not of the buffer's layout. The next range goes after it."""
        start, end = self._range
        if isinstance(got, Placed):
            assert self.joined is not None and self._scratch is not None
            self.joined.check(end - start, self._scratch)
            if self._probed is not None:
                self.engine.seq.cells_shape = self._probed
        else:
            seq, blob = self.engine.seq, as_array(got.state)
            if seq.cells_shape is None:
                seq.cells_shape = self.engine.ctx.layout.shape_of(blob)
            if (got.start, got.end) != (start, end) or self._join(seq.cells_shape).copy(self.at, blob) != end - start:
                return False
        self.at += end - start
        self.nbytes += got.nbytes
        return True

    def finish(self, start: int) -> CellsRead:
        """The batch, from the token ``start``: as far as its ranges were placed and the
        buffer holds whole cells."""
        at = self.at
        try:
            if self.joined is not None:
                self.joined.check_cells(at)
        except LayoutError:
            at = 0
        if self.joined is None or at == 0:
            return CellsRead(start, start, None, 0, False)
        blob = self.joined.blob if at == self.count else self.joined.first(at)
        return CellsRead(start, start + at, blob, self.nbytes, at == self.count)


class WindowPlacer:
    """Where the pieces of one window go: into one ring, laid once from the first piece's
    layout, each file straight into its cells (``SwaRing.piece_into``), each piece held in
    RAM copied there (``SwaRing.lay_into``)."""

    def __init__(self, ring: SwaRing, pos_max: int) -> None:
        self.ring, self.pos_max = ring, pos_max
        self.laid: LaidRing | None = None
        self.reads: list[PieceInto] = []
        """The files read into the ring, checked once all are in (``finish``)."""
        self._span = (0, 0)
        self._target: PieceInto | None = None

    def piece(self, start: int, end: int) -> Place:
        """The ``place`` of the store's ``read_into`` for the piece of the segment ``[start, end)``."""
        self._span, self._target = (start, end), None
        return self._place

    def _place(self, span: StateSpan, read_at: ReadAt) -> list[memoryview] | None:
        self._target = None  # asked again when the first read of the file fell through
        start, end = self._span
        if self.laid is None:
            a, b = piece_range(start, end, self.ring.n_swa)
            shape = self.ring.window_shape or self.ring.probe(span.state_len, read_at, b - a)
            if shape is None:
                return None
            self.laid = self.ring.skeleton(self.pos_max, shape.layers)
        self._target = self.ring.piece_into(self.laid, span.state_len, start, end, read_at)
        return self._target.pieces if self._target is not None else None

    def read(self) -> None:
        """The last piece asked for was read from its file into the ring."""
        assert self._target is not None
        self.reads.append(self._target)

    def lay(self, blob: np.ndarray) -> None:
        """A piece held in memory, copied into the ring."""
        if self.laid is None:
            self.laid = self.ring.skeleton(self.pos_max, self.ring.layers_of(blob))
        self.ring.lay_into(self.laid, blob)

    def finish(self, parts: Sequence[tuple[int, int]]) -> LaidRing:
        """The ring, once every file read proved to hold its piece and the pieces hold the
        whole window; ``LayoutError`` otherwise."""
        if self.laid is None:
            raise LayoutError("a window of no pieces")
        self.ring.placed(self.laid, self.reads)
        self.ring.check_covered(self.pos_max, parts)
        return self.laid

