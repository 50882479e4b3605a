"""Carry out the checkpoint part of a plan: cut or rewind, restore cells, restore a snapshot.

Everything here can fail halfway (a file deleted meanwhile, a checksum that no longer
matches, llama.cpp refusing a state), and a failure must never leave the live sequence
claiming tokens it does not hold exactly. So the runner tracks the last point where the
live state is known to be exact, and on any failure falls back to it: attention cells
restored past it are cut away again, and anything worse clears the sequence. The engine
then decodes from there; the result is slower, never different.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from sessions.branching.errors import CHECKPOINT_TROUBLE, RestoreFailed
from sessions.branching.planner import Plan, SnapshotInfo
from sessions.branching.restore_reads import RestoreReads, SnapshotRead
from sessions.llama.sequences import LIVE
from sessions.llama.state_blob import FLAGS_FULL, FLAGS_PARTIAL
from sessions.memory_kind import MemoryKind

if TYPE_CHECKING:
    from sessions.branching.live import Engine
    from sessions.checkpoints import Segment


class RouteRunner:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def run(self, plan: Plan, target: Sequence[int], prefixes: dict[int, str]) -> tuple[np.ndarray | None, int]:
        """Do the cut and restores of ``plan``; returns (logits if they came with it, bytes restored).

        Afterwards ``engine.live`` is the prefix of ``target`` the context holds exactly;
        it may be shorter than the plan hoped when a checkpoint failed; a failure
        clears it (it is told once), and ``target`` is then decoded from token 0. Only
        what a checkpoint may meet is caught (``CHECKPOINT_TROUBLE``): anything else is a
        bug, and goes on up.
        """
        engine = self.engine
        try:
            return self._run(plan, target, prefixes)
        except CHECKPOINT_TROUBLE as error:
            engine.checkpoint_trouble("a saved state could not be restored", error)
            engine.seq.reset()
            return None, 0

    def _run(self, plan: Plan, target: Sequence[int], prefixes: dict[int, str]) -> tuple[np.ndarray | None, int]:
        engine, ctx, seq = self.engine, self.engine.ctx, self.engine.seq
        if plan.keep < len(seq):
            if plan.keep == 0:
                seq.reset()
            else:
                self._cut(plan, prefixes)
        valid = len(seq)  # the live state is exact up to here
        restored = 0
        snapshot_at = (plan.evaluate_from, self._parts(plan.snapshot, prefixes)) if plan.snapshot is not None else None
        reads = RestoreReads(engine, plan.restore, [prefixes[info.end] for info in plan.restore], snapshot_at)
        window_in: SnapshotRead | None = None  # a window put in while cells still arrive
        early = snapshot_at is not None and engine.kind is MemoryKind.SWA
        try:
            with ctx.appending(live_empty=not len(seq)) as append:
                for batch in reads.cells():
                    if batch.blob is None or batch.start != len(seq) or not append(batch.blob):
                        break
                    seq.hold(target[: batch.end])
                    restored += batch.nbytes
                    if early:  # read while the first batch went in: copied in while the rest is read
                        window_in, early = self._window_early(reads.snapshot()), False
                    if not batch.complete:
                        break
            if engine.kind is MemoryKind.PLAIN:
                valid = len(seq)
            recurrent = engine.kind is MemoryKind.RECURRENT  # its snapshot stands alone
            wanted = plan.snapshot is not None and (recurrent or len(seq) == plan.evaluate_from)
            if window_in is not None and not wanted:
                raise RestoreFailed("the cells stopped short of the window already put back")
            snapshot = window_in or (reads.snapshot() if wanted else None)
            if snapshot is not None and window_in is None:  # a window with no cells to restore
                window_in = self._window_early(snapshot)
        finally:
            reads.close()
        logits = seq.logits if plan.logits_source == "live" else None
        if snapshot is not None:
            self._apply(snapshot)
            seq.hold(target[: plan.evaluate_from])
            valid = plan.evaluate_from
            restored += snapshot.nbytes
            if snapshot.logits is not None:
                logits = np.frombuffer(snapshot.logits, dtype=np.float32).copy()
                seq.keep_logits(logits)
        if valid == len(target) and logits is None and plan.logits_source != "none" and engine.kind is MemoryKind.PLAIN:
            valid = max((b for b in prefixes if b < valid), default=0)  # decode the last segment for logits
        if valid < len(seq):  # cells restored past the last exact state: cut them off
            if not ctx.seq_rm(LIVE, valid, -1):
                raise RestoreFailed("could not take back restored cells")
            seq.cut(valid)
            logits = None
        return logits, restored

    @staticmethod
    def _parts(snapshot: SnapshotInfo, prefixes: dict[int, str]) -> list[tuple[str, int, int]]:
        """``(prefix, start, end)`` of what a snapshot is made of: a window's pieces, or itself."""
        if snapshot.parts:
            return [(prefixes[end], start, end) for start, end in snapshot.parts]
        return [(prefixes[snapshot.end], snapshot.end, snapshot.end)]

    def _get(self, prefix: str, kind) -> Segment | None:
        store = self.engine.store
        return store.get(self.engine.compat, prefix, kind) if store is not None else None

    def _cut(self, plan: Plan, prefixes: dict[int, str]) -> None:
        """Cut the live sequence back to ``plan.keep``, putting back what the kind keeps besides."""
        engine, ctx, keep = self.engine, self.engine.ctx, plan.keep
        end = len(engine.seq.tokens)
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
            ring = engine.seq.ring
            assert ring is not None and (plan.rewind is None or plan.rewind.parts)
            if plan.rewind is None:
                if ring.reused_by(end):  # (else the cut left the ring as the run to ``keep`` has it)
                    ring.relay()
            else:
                pieces = [self._get(prefix, "snapshot") for prefix, _s, _e in self._parts(plan.rewind, prefixes)]
                if any(piece is None or len(piece.state) == 0 for piece in pieces):
                    raise RestoreFailed("a piece of the window to rewind to is gone")
                ring.restore([piece.state for piece in pieces if piece is not None], keep - 1)
        engine.seq.cut(keep)

    def _rewind_snapshot(self, plan: Plan, prefixes: dict[int, str]) -> Segment:
        snapshot = self._get(prefixes[plan.keep], "snapshot") if plan.rewind is not None else None
        if snapshot is None or len(snapshot.state) == 0:
            raise RestoreFailed("the snapshot to rewind to is gone")
        return snapshot

    def _window_early(self, snapshot: SnapshotRead | None) -> SnapshotRead | None:
        """Put a sliding window in while the cells of its branch still arrive; the
        snapshot if it went in.

        The window cache is apart from the cells, so it need not wait for them:
        llama.cpp's copy of the ring (the largest single state of the restore) then
        overlaps the reading of the cells instead of following it. Should the cells
        then stop short of the window, the live sequence is rebuilt (``RestoreFailed``).
        """
        ring = self.engine.seq.ring
        if ring is None or snapshot is None or snapshot.ring is None:
            return None
        ring.put_window(snapshot.ring)
        return snapshot

    def _apply(self, snapshot: SnapshotRead) -> None:
        """Put the recurrent state of ``snapshot`` back, or finish its window (which
        ``_window_early`` put in: only the head is left)."""
        engine, ctx = self.engine, self.engine.ctx
        if len(snapshot.state) == 0:
            return  # a plain model's snapshot: logits only
        if engine.kind is MemoryKind.SWA:
            assert engine.seq.ring is not None and snapshot.ring is not None  # laid whenever it has a state
            engine.seq.ring.finish(snapshot.ring)
        else:
            flags = FLAGS_FULL if engine.kind is MemoryKind.RECURRENT else FLAGS_PARTIAL
            if not ctx.state_write(snapshot.state, LIVE, flags):
                raise RestoreFailed("llama.cpp refused the saved state")
