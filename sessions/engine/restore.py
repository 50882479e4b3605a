"""Carry out the checkpoint part of a plan: cut or rewind, restore cells, restore a snapshot.

Everything here can fail halfway (a file deleted meanwhile, a checksum that no longer
matches, llama.cpp refusing a state), and a failure must never leave the live sequence
claiming tokens it does not hold exactly. So the runner tracks the last point where the
live state is known to be exact, and on any failure falls back to it: attention cells
restored past it are cut away again, and anything worse clears the sequence. The engine
then decodes from there; the result is slower, never different.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np

from sessions.engine.planner import Plan
from sessions.engine.state_blob import FLAGS_FULL, FLAGS_PARTIAL, LayoutError, as_array, join_attention
from sessions.engine.swa_ring import LIVE
from sessions.memory_kind import MemoryKind

if TYPE_CHECKING:
    from sessions.checkpoints import CheckpointStore, Kind, Segment, StateCompat
    from sessions.engine.captures import Captures
    from sessions.engine.context import LlamaContext
    from sessions.engine.live import LiveSequence


class RestoreFailed(Exception):
    """A checkpoint could not be put back; the live sequence must be rebuilt."""


class CellsBatch:
    """Consecutive ranges' cells restored with one llama.cpp call (``join_attention``).

    Batches of about ``LIMIT`` bytes: large enough that the per-call costs vanish, small
    enough that reading the next batch overlaps with llama.cpp copying this one.
    """

    LIMIT = 8 << 20

    def __init__(self, ctx: LlamaContext) -> None:
        self.ctx = ctx
        self.segments: list[Segment] = []
        self.restored = 0
        self._bytes = 0

    @property
    def tokens(self) -> int:
        return self.segments[-1].end - self.segments[0].start if self.segments else 0

    @property
    def full(self) -> bool:
        return self._bytes >= self.LIMIT

    def add(self, segment: Segment) -> None:
        self.segments.append(segment)
        self._bytes += len(segment.state)

    def write(self) -> bool:
        segments, self.segments, self._bytes = self.segments, [], 0
        if len(segments) == 1:
            blob = as_array(segments[0].state)
        else:
            blob = join_attention([as_array(s.state) for s in segments], self.ctx.cells_tail())
        if not self.ctx.append_cells(blob):
            return False
        self.restored += sum(s.nbytes for s in segments)
        return True


class Prefetch:
    """Checkpoints read (and checked) on a helper thread ahead of their restore.

    Reading a file and checking its checksum release the GIL, and so does llama.cpp
    copying the previous one into the context: with the two overlapped, a restore from
    disk costs about the larger of the two instead of their sum. ``AHEAD`` bounds the
    memory held by checkpoints read but not restored yet.
    """

    AHEAD = 8

    def __init__(self, store: CheckpointStore | None, compat: StateCompat, wanted: list[tuple[str, Kind]]) -> None:
        self._store, self._compat = store, compat
        self._wanted = wanted
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="checkpoint-read") if store is not None else None
        self._pending: deque[Future[Segment | None]] = deque()
        self._next = 0
        self._fill()

    def _read(self, prefix: str, kind: Kind) -> Segment | None:
        assert self._store is not None
        return self._store.get(self._compat, prefix, kind)

    def _fill(self) -> None:
        while self._pool is not None and self._next < len(self._wanted) and len(self._pending) < self.AHEAD:
            self._pending.append(self._pool.submit(self._read, *self._wanted[self._next]))
            self._next += 1

    def next(self) -> Segment | None:
        """The next checkpoint in order (None when it is missing or failed its checks)."""
        if not self._pending:
            return None
        segment = self._pending.popleft().result()
        self._fill()
        return segment

    def last(self) -> Segment | None:
        """The final checkpoint asked for, whatever came before it."""
        while self._next < len(self._wanted) or len(self._pending) > 1:
            if self._pending:
                self._pending.popleft().cancel()
            self._fill()
        return self.next()

    def close(self) -> None:
        for future in self._pending:
            future.cancel()
        if self._pool is not None:
            self._pool.shutdown(wait=True)


class RouteRunner:
    def __init__(self, engine: LiveSequence, captures: Captures) -> None:
        self.engine = engine
        self.captures = captures

    def run(self, plan: Plan, target: Sequence[int], prefixes: dict[int, str]) -> tuple[np.ndarray | None, int]:
        """Do the cut and restores of ``plan``; returns (logits if they came with it, bytes restored).

        Afterwards ``engine.live`` is the prefix of ``target`` the context holds exactly;
        it may be shorter than the plan hoped when a checkpoint failed.
        """
        engine = self.engine
        try:
            return self._run(plan, target, prefixes)
        except (RestoreFailed, LayoutError, RuntimeError):
            engine._reset()
            return None, 0

    def _run(self, plan: Plan, target: Sequence[int], prefixes: dict[int, str]) -> tuple[np.ndarray | None, int]:
        engine, ctx = self.engine, self.engine.ctx
        changed = plan.keep < len(engine.live)
        if plan.keep < len(engine.live):
            if plan.keep == 0:
                engine._reset()
            else:
                self._cut(plan, prefixes)
        valid = len(engine.live)  # the live state is exact up to here
        restored = 0
        wanted: list[tuple[str, Kind]] = [(prefixes[info.end], "cells") for info in plan.restore]
        if plan.snapshot is not None:
            wanted.append((prefixes[plan.evaluate_from], "snapshot"))
        reads = Prefetch(engine.store, engine.compat, wanted)
        try:
            batch = CellsBatch(ctx)
            for _ in plan.restore:
                segment = reads.next()
                if segment is None or segment.start != len(engine.live) + batch.tokens:
                    break
                batch.add(segment)
                if batch.full and not self._apply_cells(batch, target):
                    break
            self._apply_cells(batch, target)
            restored += batch.restored
            if engine.kind is MemoryKind.PLAIN:
                valid = len(engine.live)
            snapshot = reads.last() if plan.snapshot is not None else None
        finally:
            reads.close()
        logits = engine.live_logits if plan.logits_source == "live" else None
        recurrent = engine.kind is MemoryKind.RECURRENT  # its snapshot stands alone
        if plan.snapshot is not None and (recurrent or len(engine.live) == plan.evaluate_from):
            if snapshot is not None:
                self._apply(snapshot, plan.evaluate_from)
                engine.live = list(target[: plan.evaluate_from])
                valid = plan.evaluate_from
                restored += snapshot.nbytes
                if snapshot.logits is not None:
                    logits = np.frombuffer(snapshot.logits, dtype=np.float32).copy()
                    engine.live_logits = logits
        if valid == len(target) and logits is None and plan.logits_source != "none" and engine.kind is MemoryKind.PLAIN:
            valid = max((b for b in prefixes if b < valid), default=0)  # decode the last segment for logits
        if valid < len(engine.live):  # cells restored past the last exact state: cut them off
            if not ctx.seq_rm(LIVE, valid, -1):
                raise RestoreFailed("could not take back restored cells")
            engine.live = engine.live[:valid]
            engine.live_logits = None
            logits = None
        if restored or changed:  # on another branch now: what is on disk along it?
            self.captures.learn_branch(prefixes, valid)
            self.captures.restored_at(valid)
        return logits, restored

    def _apply_cells(self, batch: CellsBatch, target: Sequence[int]) -> bool:
        """Append the batch's cells to the live sequence; False when llama.cpp refused them."""
        if not batch.segments:
            return True
        end = batch.segments[-1].end
        done = batch.write()
        if done:
            self.engine.live = list(target[:end])
            self.engine.live_logits = None
        return done

    def _get(self, prefix: str, kind) -> Segment | None:
        store = self.engine.store
        return store.get(self.engine.compat, prefix, kind) if store is not None else None

    def _cut(self, plan: Plan, prefixes: dict[int, str]) -> None:
        """Cut the live sequence back to ``plan.keep``, putting back what the kind keeps besides."""
        engine, ctx, keep = self.engine, self.engine.ctx, plan.keep
        if engine.kind is MemoryKind.HYBRID:
            snapshot = self._rewind_snapshot(plan, prefixes)
            # Recurrent state first, then the attention cells: the other order keeps stale cells.
            if not ctx.state_write(snapshot.state, LIVE, FLAGS_PARTIAL):
                raise RestoreFailed("llama.cpp refused the recurrent state")
            if not ctx.seq_rm(LIVE, keep, -1):
                raise RestoreFailed("llama.cpp refused the cut")
        elif not ctx.seq_rm(LIVE, keep, -1):
            raise RestoreFailed("llama.cpp refused the cut")
        elif engine.kind is MemoryKind.SWA:
            ring = engine.ring
            assert ring is not None
            if plan.rewind is None:
                ring.relay()
            else:
                ring.restore(self._rewind_snapshot(plan, prefixes).state, keep - 1)
        engine.live = engine.live[:keep]
        engine.live_logits = None

    def _rewind_snapshot(self, plan: Plan, prefixes: dict[int, str]) -> Segment:
        snapshot = self._get(prefixes[plan.keep], "snapshot") if plan.rewind is not None else None
        if snapshot is None or len(snapshot.state) == 0:
            raise RestoreFailed("the snapshot to rewind to is gone")
        return snapshot

    def _apply(self, snapshot: Segment, end: int) -> None:
        """Put the window or recurrent state of ``snapshot`` back at ``end``."""
        engine, ctx = self.engine, self.engine.ctx
        if len(snapshot.state) == 0:
            return  # a plain model's snapshot: logits only
        if engine.kind is MemoryKind.SWA:
            ring = engine.ring
            assert ring is not None
            ring.restore(snapshot.state, end - 1)
        else:
            flags = FLAGS_FULL if engine.kind is MemoryKind.RECURRENT else FLAGS_PARTIAL
            if not ctx.state_write(snapshot.state, LIVE, flags):
                raise RestoreFailed("llama.cpp refused the saved state")
