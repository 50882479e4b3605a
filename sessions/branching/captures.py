"""Checkpoints the decode passed but has not read out yet, and reading them out.

The decode loop only notes what it passed: the token ranges whose attention cells should
be saved, and the boundaries that get a snapshot (``SnapshotPolicy``: every one, so that
each branch point survives a restart, but for those a GPU would read on the path to the
first token that the restart bound can spare). A sliding window's snapshot is the piece
of the segment that ends there (``swa_ring``: each token's sliding-layer cells are kept
once), so every boundary of a windowed model gets one. Reading them out of the context
waits until the reply is written (``flush``): attention cells do not change once
computed, and a piece stays in the ring for ``N`` tokens after its first one, so both
can still be read then, exactly as they were; a range's cells and its piece come out of
the context in one read. Only two things are read at once: a recurrent state (the next
token overwrites it), and a piece the ring is about to overwrite (``before_decode``),
which a long prompt or reply can reach. Both go into memory whose pages were mapped
ahead (``sessions.llama.warm_buffers``): a piece's buffer is asked for at its exact size
(``SwaRing.piece_bytes``) a batch before the decode that reaches it, and kept as read.
Everything read goes to the store's RAM tier and, on the store's own thread, to disk.

A checkpoint that cannot be read (a state llama.cpp wrote in a layout not understood
here, ``sessions.branching.errors``) is dropped and told once: the decode goes on, the
reply is stored, and a later restore evaluates those tokens again.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sessions.branching.errors import CHECKPOINT_TROUBLE
from sessions.branching.snapshot_policy import SnapshotPolicy, restart_spacing
from sessions.checkpoints import CheckpointStore, PrefixHasher, Segment, prefix_hash
from sessions.llama.range_reads import read_ranges
from sessions.llama.ring_geometry import piece_range
from sessions.llama.sequences import LIVE
from sessions.llama.state_blob import FLAGS_FULL, FLAGS_PARTIAL, HEADER
from sessions.memory_kind import MemoryKind

if TYPE_CHECKING:
    from sessions.branching.live import Engine

EMPTY = np.zeros(0, dtype=np.uint8)


def prefix_hashes(target: Sequence[int], bounds: Sequence[int]) -> dict[int, str]:
    """``prefix_hash(target[:b])`` for every boundary ``b``, in one pass."""
    tokens = array("i", target)
    hasher, out, pos = PrefixHasher(), {}, 0
    for b in bounds:
        out[b] = hasher.extend(tokens[pos:b]).hexdigest()
        pos = b
    return out


@dataclass
class _Snapshot:
    start: int
    """Where the segment ending here starts (a sliding window's piece is of that segment)."""
    end: int
    prefix: str
    state: np.ndarray | None
    """Read already, or None: read it at ``flush`` (or before the ring overwrites it)."""
    logits: np.ndarray | None
    asked: bool = False
    """A touched buffer was asked for its piece (``WarmBuffers.expect_once``): read on a decode's path."""


class Captures:
    """What one engine still has to read out of its context and hand to the store."""

    def __init__(self, engine: Engine, store: CheckpointStore | None, policy: SnapshotPolicy) -> None:
        self.engine = engine
        self.store = store
        self.policy = policy
        self.ring = engine.seq.ring
        self.ranges: list[tuple[int, int, str, str | None]] = []
        self.snapshots: list[_Snapshot] = []
        self.grid = restart_spacing(engine.kind, engine.n_swa)
        """Where long messages are cut (``snapshot_policy``): the finest spacing of snapshots."""
        self._state_spacing: int | None = None
        """Tokens between recurrent states inside a long message (``state_spacing``), once
        the state's size is known."""
        self._mark_pos = 0
        """Position on the live branch of the last snapshot (or of the state decoding
        started from: a prompt end, a tip, a restore)."""
        self._snapshot_bytes = 0
        """Size of a recurrent state, once read or measured: it keeps its size, so once it
        is known no buffer is made ready for it again before a decode (``before_decode``)."""
        self._planned: list[tuple[int, int]] = []
        """Segments of the prefill under way whose pieces the rest of it will overwrite,
        so that they are read on its path (``plan_reads``), not asked for yet."""
        self._reply_hasher: PrefixHasher | None = None
        """The hash of the reply being written up to its last noted range, extended range by
        range: hashing the whole live sequence at each range costs time quadratic in the
        reply's length. It lives for one ``generate`` only: ``flush``, which every
        ``prepare`` starts with and every ``generate`` ends with, drops it, so it never
        follows a live sequence that changed other than by the reply's tokens."""

    @property
    def spacing(self) -> int:
        """Most tokens between two snapshots inside a long message: a window's for a sliding
        window (every cut), this model's ``state_spacing`` for a recurrent state."""
        assert self.grid is not None
        if self.ring is not None or not self._has_state:
            return self.grid
        if self._state_spacing is None:
            ctx, live = self.engine.ctx, len(self.engine.seq.tokens)
            if not live:
                return self.grid
            state = ctx.state_size(LIVE, self._flags())
            kv_per_token = (ctx.state_size(LIVE, FLAGS_FULL) - state) / live if self.engine.kind is not \
                MemoryKind.RECURRENT else 0.0
            spacing = self.policy.state_spacing(state, kv_per_token, ctx.speeds.batched)
            if ctx.speeds.batched is None:
                return spacing  # asked again once a batch has been timed
            self._state_spacing = spacing
        return self._state_spacing

    @property
    def _has_state(self) -> bool:
        return self.engine.kind is not MemoryKind.PLAIN

    # -- noting, in the decode loop ---------------------------------------------------------

    def note_range(self, start: int, end: int, prefixes: dict[int, str]) -> None:
        if self.store is not None and end > start and self.engine.kind is not MemoryKind.RECURRENT:
            self.ranges.append((start, end, prefixes[end], prefixes[start] if start else None))

    def note_reply_range(self, start: int, live: Sequence[int], *, last: bool) -> None:
        """A range of a reply (every ``interval`` tokens, and its end when ``last``)."""
        if self.store is None:
            return
        hasher = self._reply_hasher
        if hasher is None or hasher.count != start:  # the reply's first range: hash what it follows
            hasher = self._reply_hasher = PrefixHasher(live[:start])
        parent = hasher.hexdigest() if start else None
        prefix = hasher.extend(live[start:]).hexdigest()
        if self.engine.kind is not MemoryKind.RECURRENT:
            self.ranges.append((start, len(live), prefix, parent))
        if not last:
            self.maybe_snapshot(start, len(live), prefix)

    def decoding_from(self, start: int) -> None:
        """Decoding starts at ``start``, whose state is a snapshot's (or needs none)."""
        self._mark_pos = start

    def maybe_snapshot(self, start: int, end: int, prefix: str | None, *, until: int | None = None,
                       next_end: int | None = None, logits: np.ndarray | None = None) -> None:
        """At a boundary inside a prompt or reply, after the segment ``[start, end)``: note
        its snapshot (``SnapshotPolicy``).

        ``until``: where the prompt being decoded ends. A piece that the rest of it will
        overwrite is read now, straight from the ring, rather than copied out of it later
        (``before_decode``), which costs a sequence copy more. ``next_end``: the next
        boundary (the restart bound needs a recurrent snapshot here if that one is more
        than the spacing past the last). ``logits``: those after the boundary, at the
        end of a message (a plain model keeps only them). Every boundary of a windowed
        model gets its piece: the windows of the boundaries after it are made of them.
        """
        if self.store is None or not (self._has_state or logits is not None):
            return
        if not self.policy.boundaries and self.ring is None:
            return  # (a window's pieces are how it is kept: never left out)
        now = self.ring is None or (until is not None and self._overwritten(start, end, until))
        if self._has_state and self.ring is None and logits is None and not self._due_now(end, next_end):
            return  # (a message's end keeps its state: every gesture starts at one)
        self.decoding_from(end)
        prefix = prefix or prefix_hash(self.engine.seq.tokens[:end])
        if self._kept(prefix):
            return
        if not self._has_state:
            state: np.ndarray | None = EMPTY
        elif self.ring is None:
            state = self._read_now()
        elif now:
            state = self._read_piece(start, end, once=True)
        else:
            state = None
        self.snapshots.append(_Snapshot(start, end, prefix, state, logits))

    def _due_now(self, end: int, next_end: int | None) -> bool:
        """Does the spacing of states need one at ``end``, inside a message (``SnapshotPolicy``)?"""
        if self.policy.every_boundary:
            return True
        spacing = self.spacing
        reach = next_end if next_end is not None else end + spacing
        return reach - self._mark_pos > spacing  # the next boundary would be past the bound

    def note_end(self, start: int, end: int, prefix: str, logits: np.ndarray | None) -> None:
        """The end of a prompt or of a switch (its last segment ``[start, end)``): a
        regenerate, an edit of the next message, the next turn or a switch back starts here."""
        if self.store is None:
            return
        self.decoding_from(end)
        if self._kept(prefix):
            return
        state = self._read_now() if self._has_state and self.ring is None else None
        self.snapshots.append(_Snapshot(start, end, prefix, state, logits))

    def note_tip(self, start: int, live: Sequence[int], logits: np.ndarray | None) -> None:
        """The end of a reply, whose last segment starts at ``start`` (``logits`` only when
        it may be continued)."""
        if self.store is None or (not self._has_state and logits is None):
            return
        hasher = self._reply_hasher  # at the reply's end when its last range was noted
        prefix = hasher.hexdigest() if hasher is not None and hasher.count == len(live) else prefix_hash(live)
        self.decoding_from(len(live))
        self.snapshots.append(_Snapshot(start, len(live), prefix, None, logits))

    def _kept(self, prefix: str) -> bool:
        """Whether the snapshot at ``prefix`` is in the store already, on its way to disk.

        One kept in RAM only (its disk write was dropped, the writer's queue being full)
        is queued for the disk again: a restart needs it as much as this process does.
        """
        store, compat = self.store, self.engine.compat
        assert store is not None
        if not store.has(compat, prefix, "snapshot"):
            return False
        if not store.persisted(compat, prefix, "snapshot"):
            kept = store.get(compat, prefix, "snapshot")
            if kept is not None:
                store.put(kept, persist=True)
        return True

    def plan_reads(self, segments: Sequence[tuple[int, int]], until: int, prefixes: dict[int, str]) -> None:
        """A prefill up to ``until`` is about to decode ``segments``: those whose pieces it
        will overwrite are read on its path (``maybe_snapshot``), into buffers asked for
        a batch or two ahead (``before_decode``)."""
        self._planned.clear()
        if self.store is None or self.ring is None:
            return
        compat = self.engine.compat
        self._planned = [(a, b) for a, b in segments if b < until and self._overwritten(a, b, until)
                         and not self.store.has(compat, prefixes[b], "snapshot")]

    def before_decode(self, next_end: int) -> None:
        """Read the pieces whose cells the tokens up to ``next_end`` would overwrite, and
        ask for touched buffers for those that will be read within a batch after it."""
        if self.ring is None:
            if not self._snapshot_bytes and self.store is not None and self._has_state:
                self._expect_snapshots()
            return
        for snap in self.snapshots:
            if snap.state is None and self._overwritten(snap.start, snap.end, next_end):
                snap.state = self._read_piece(snap.start, snap.end, once=True)
        self._ask_ahead(next_end + self.engine.ctx.params.n_batch)

    def _ask_ahead(self, horizon: int) -> None:
        """Ask for a touched buffer for each piece that will be read on a decode's path
        before the live sequence reaches ``horizon``: the ones a prefill plans to read at
        their segment's end, and those noted earlier that the run will overwrite."""
        assert self.ring is not None
        warm, ring = self.engine.ctx.warm, self.ring
        if not (self.engine.seq.tokens or ring.sizes_known):
            return  # sizes come from a piece of the live sequence: asked for after its first batch
        live = len(self.engine.seq.tokens)
        while self._planned and self._planned[0][1] <= horizon:
            a, b = self._planned.pop(0)
            size = ring.piece_bytes(a, b) if b > live else None  # (one read before sizes were known)
            if size is not None:
                warm.expect_once(size, b)
        for snap in self.snapshots:
            if snap.state is None and not snap.asked and self._overwritten(snap.start, snap.end, horizon):
                size = ring.piece_bytes(snap.start, snap.end)
                if size is not None:
                    warm.expect_once(size, piece_range(snap.start, snap.end, self.engine.n_swa)[0] + ring.size + 1)
                snap.asked = True

    def _expect_snapshots(self) -> None:
        """Before the first decode of a model with a recurrent state: its size.

        That decode then has the helper touch a buffer for it (``WarmBuffers``), so the
        first state a prefill reads needs no new memory either: a page's first touch
        costs more than the copy into it. A recurrent state has its size from the first
        token.
        """
        if not self.engine.seq.tokens:
            return
        self._snapshot_bytes = size = self.engine.ctx.state_size(LIVE, self._flags())
        self.engine.ctx.warm.expect(size)

    def _overwritten(self, start: int, end: int, next_end: int) -> bool:
        """Do tokens up to ``next_end`` overwrite a cell of the piece of ``[start, end)``?

        By the ring's own rule (``SwaRing.overwritten``), which its reads refuse by: a
        piece left for ``flush`` is then still there to read.
        """
        assert self.ring is not None
        return self.ring.overwritten(piece_range(start, end, self.engine.n_swa)[0], next_end - 1)

    # -- reading out -------------------------------------------------------------------

    def _flags(self) -> int:
        return FLAGS_FULL if self.engine.kind is MemoryKind.RECURRENT else FLAGS_PARTIAL

    def _read_now(self) -> np.ndarray:
        """The recurrent state as it stands (``EMPTY`` when it cannot be read: told once)."""
        t0 = time.perf_counter()
        try:
            state = self.engine.ctx.state_read(LIVE, self._flags(), warm=True)
        except CHECKPOINT_TROUBLE as error:
            self.engine.checkpoint_trouble("a recurrent state could not be saved", error)
            return EMPTY
        self._timed(state, t0)
        return state

    def _read_piece(self, start: int, end: int, *, once: bool = False) -> np.ndarray:
        """The piece of ``[start, end)`` (``EMPTY`` when it is gone, or cannot be read: told
        once); ``once``: on the decode's path, into the touched buffer asked for it."""
        assert self.ring is not None
        t0 = time.perf_counter()
        try:
            piece = self.ring.piece(start, end, checked=False, once=once)  # checked when saved
        except CHECKPOINT_TROUBLE as error:
            self.engine.checkpoint_trouble("a sliding window could not be saved", error)
            return EMPTY
        if piece is None:
            return EMPTY
        self._timed(piece, t0)
        return piece

    def _timed(self, state: np.ndarray, t0: float) -> None:
        self.policy.timed(len(state), time.perf_counter() - t0)
        self._snapshot_bytes = max(self._snapshot_bytes, len(state))

    def flush(self) -> None:
        """Read out everything noted and hand it to the store (after the reply).

        A range or snapshot that cannot be read out is dropped with the rest of this
        flush, and told once (``checkpoint_trouble``).
        """
        self._reply_hasher = None
        if not self.ranges and not self.snapshots:
            return
        t0 = time.perf_counter()
        store, engine = self.store, self.engine
        assert store is not None
        try:
            if self.ring is None:
                self._read_out_ranges()
            else:
                waiting = {snap.end: snap for snap in self.snapshots if snap.state is None}
                for start, end, prefix, parent in self.ranges:
                    snap = waiting.get(end)
                    self._read_out_range(start, end, prefix, parent, snap if snap and snap.start == start else None)
            for snap in self.snapshots:
                self._save_snapshot(snap)
        except CHECKPOINT_TROUBLE as error:
            engine.checkpoint_trouble("the checkpoints of a reply could not be saved", error)
        finally:
            self.ranges.clear()
            self.snapshots.clear()
            self._planned.clear()
            engine.ctx.warm.forget_once()  # buffers asked for reads that did not happen
            engine.deferred_seconds += time.perf_counter() - t0

    def _read_out_ranges(self) -> None:
        """The cells of the ranges not in the store yet, read together (``range_reads``: a
        hybrid's reads each carry its whole recurrent state)."""
        store, compat = self.store, self.engine.compat
        assert store is not None
        wanted = [r for r in self.ranges if not store.has(compat, r[2], "cells")]
        blobs = read_ranges(self.engine.ctx, [(start, end) for start, end, _p, _q in wanted])
        for (start, end, prefix, parent), blob in zip(wanted, blobs, strict=True):
            store.put(Segment(compat, prefix, parent, start, end, blob))

    def _read_out_range(self, start: int, end: int, prefix: str, parent: str | None, piece: _Snapshot | None) -> None:
        """The cells of a range into the store, and the piece of it a snapshot waits for
        (a sliding window's): the two from one read when both are wanted."""
        store, ctx = self.store, self.engine.ctx
        assert store is not None
        if store.has(self.engine.compat, prefix, "cells"):
            if piece is not None:
                piece.state = self._read_piece(start, end)
            return
        if piece is None:
            blob = ctx.read_range(start, end)
        else:
            blob, state = ctx.read_range_parts(start, end)
            piece.state = state if self._whole_piece(state, start, end) else self._read_piece(start, end)
        store.put(Segment(self.engine.compat, prefix, parent, start, end, blob))

    def _whole_piece(self, piece: np.ndarray, start: int, end: int) -> bool:
        """Whether a state read with a range's cells holds that range's whole piece (none
        of its cells overwritten yet)."""
        a, b = piece_range(start, end, self.engine.n_swa)
        try:
            positions = self.engine.ctx.layout.read_positions(piece, HEADER.size)
        except CHECKPOINT_TROUBLE:
            return False
        return len(positions) == b - a and (not len(positions) or (positions.min(), positions.max()) == (a, b - 1))

    def _save_snapshot(self, snap: _Snapshot) -> None:
        engine, store = self.engine, self.store
        assert store is not None
        state = snap.state
        if state is None:
            if self.ring is not None:
                state = self._read_piece(snap.start, snap.end)
            elif self._has_state and snap.end == len(engine.seq.tokens):
                state = self._read_now()
            else:
                state = EMPTY if not self._has_state else None
        if state is None or (self._has_state and len(state) == 0):
            return  # the state is gone (a window the ring overwrote): a restore re-decodes
        if self.ring is not None and not self.ring.in_run_order(state):
            return  # a ring out of the run's layout: its window would not restore exactly
        logits = snap.logits.astype(np.float32).view(np.uint8) if snap.logits is not None else None
        if len(state) == 0 and logits is None:
            return
        store.put(Segment(engine.compat, snap.prefix, None, snap.end, snap.end, state, logits, kind="snapshot"))
