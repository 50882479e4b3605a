"""Checkpoints the decode passed but has not read out yet, and reading them out.

The decode loop only notes what it passed: the token ranges whose attention cells should
be saved, and the boundaries that deserve a snapshot (``SnapshotPolicy``). Reading them
out of the context waits until the reply is written (``flush``): attention cells do not
change once computed, and a sliding window stays in the ring for ``N - n_swa`` tokens,
so both can still be read then, exactly as they were. Only two things are read at once:
a recurrent state (the next token overwrites it), and a window the ring is about to
overwrite (``before_decode``), which a long prompt or reply can reach.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

import numpy as np

from sessions.checkpoints import CheckpointStore, PrefixHasher, Segment, prefix_hash
from sessions.engine.snapshot_policy import SnapshotPolicy
from sessions.engine.state_blob import FLAGS_FULL, FLAGS_PARTIAL
from sessions.engine.swa_ring import LIVE
from sessions.memory_kind import MemoryKind

if TYPE_CHECKING:
    from sessions.engine.live import LiveSequence

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
    end: int
    prefix: str
    state: np.ndarray | None
    """Read already, or None: read it at ``flush`` (or before the ring overwrites it)."""
    logits: np.ndarray | None
    role: Role


Role = Literal["spaced", "prompt", "tip"]
"""Why a snapshot was taken: a spacing inside a long prompt, the end of a prompt (where a
regenerate starts), or the tip of a branch (the end of a reply or of a switch: where the
next turn, or a switch back, starts). The latest prompt end and tip of the branch the
user is on stay on disk; older ones leave it when newer ones arrive."""


class Captures:
    """What one engine still has to read out of its context and hand to the store."""

    def __init__(self, engine: LiveSequence, store: CheckpointStore | None, policy: SnapshotPolicy) -> None:
        self.engine = engine
        self.store = store
        self.policy = policy
        self.ring = engine.ring
        self.ranges: list[tuple[int, int, str, str | None]] = []
        self.snapshots: list[_Snapshot] = []
        self._mark = 0.0
        """Decode seconds on the context at the last snapshot (the policy's clock)."""
        self._mark_pos = 0
        """Position on the live branch of the last snapshot."""
        self.anchor = 0
        """Position on the live branch of the last snapshot kept on disk for good (0: none)."""
        self.temporary: dict[Role, str] = {}
        """Prefix of the latest prompt end and tip on disk of the branch the engine is on,
        which newer ones replace (their files say so: ``Segment.role``)."""
        self.cells_bytes_per_token = 0.0
        """Measured size of saved attention cells per token (for the disk rule)."""
        self._snapshot_bytes = 0
        """Size of the largest snapshot read (or, before the first, measured) so far: a
        full window or a recurrent state keeps its size, so the policy needs no size query
        per boundary once it has one."""
        self._reply_hasher: PrefixHasher | None = None
        """The hash of the reply being written up to its last noted range, extended range by
        range: hashing the whole live sequence at each range costs time quadratic in the
        reply's length. It lives for one ``generate`` only: ``flush``, which every
        ``prepare`` starts with and every ``generate`` ends with, drops it, so it never
        follows a live sequence that changed other than by the reply's tokens."""

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
            self.maybe_snapshot(len(live), prefix)

    def maybe_snapshot(self, end: int, prefix: str | None, *, until: int | None = None) -> None:
        """At a boundary inside a prompt or reply: snapshot it if the policy says so.

        ``until``: where the prompt being decoded ends. A window that the rest of it
        will overwrite is read now, straight from the ring, rather than copied out of
        it later (``before_decode``), which costs a sequence copy more.
        """
        if self.store is None or not self._has_state:
            return
        ctx = self.engine.ctx
        nbytes = self._snapshot_bytes or ctx.state_size(LIVE, self._flags())
        min_tokens = self.engine.n_swa if self.ring is not None else 0
        if not self.policy.due(ctx.decode_seconds - self._mark, nbytes, tokens_since=end - self._mark_pos,
                               min_tokens=min_tokens):
            return
        self._set_mark(end)
        prefix = prefix or prefix_hash(self.engine.live[:end])
        if self.store.has(self.engine.compat, prefix, "snapshot"):
            return
        if self.ring is None:
            state: np.ndarray | None = self._read_now()
        elif until is not None and self._overwritten(end, until):
            state = self._read_window(end)
        else:
            state = None
        self.snapshots.append(_Snapshot(end, prefix, state, None, "spaced"))

    def note_end(self, end: int, prefix: str, logits: np.ndarray | None, *, tip: bool) -> None:
        """The end of a prompt: a regenerate or an edit of the next message starts here.

        ``tip`` when no reply follows (a switch to this branch): it is where the user is,
        and where they come back to after a restart.
        """
        store, compat = self.store, self.engine.compat
        if store is None:
            return
        role: Literal["prompt", "tip"] = "tip" if tip else "prompt"
        if store.has(compat, prefix, "snapshot"):
            ram_only = not store.persisted(compat, prefix, "snapshot")
            kept = store.get(compat, prefix, "snapshot") if ram_only else None
            if kept is not None:  # kept in RAM only so far: now it is worth the disk
                store.put(replace(kept, role=role), persist=True)
                self._keep_temporary(role, prefix)
            return
        self._set_mark(end)
        state = self._read_now() if self._has_state and self.ring is None else None
        self.snapshots.append(_Snapshot(end, prefix, state, logits, role))

    def note_tip(self, live: Sequence[int], logits: np.ndarray | None) -> None:
        """The end of a reply (``logits`` only when it may be continued)."""
        if self.store is None or (not self._has_state and logits is None):
            return
        self._set_mark(len(live))
        hasher = self._reply_hasher  # at the reply's end when its last range was noted
        prefix = hasher.hexdigest() if hasher is not None and hasher.count == len(live) else prefix_hash(live)
        self.snapshots.append(_Snapshot(len(live), prefix, None, logits, "tip"))

    def restored_at(self, end: int) -> None:
        """A restore put back the state at ``end``: the snapshot clock starts again there."""
        self._set_mark(end)

    def learn_branch(self, prefixes: dict[int, str], valid: int) -> None:
        """After a switch: what is on disk along the branch now live, up to ``valid``.

        The last snapshot there kept for good starts the disk rule's spacing. The latest
        prompt end and tip on disk there (their files say so, across restarts too) become
        the branch's temporaries again, so the next turn replaces them, as if the user had
        never left; otherwise every visit would leave a pair behind.
        """
        store, compat = self.store, self.engine.compat
        if store is None:
            return
        self.anchor, self.temporary = 0, {}
        for b in sorted(b for b in prefixes if 0 < b <= valid):
            prefix = prefixes[b]
            if not store.persisted(compat, prefix, "snapshot"):
                continue
            meta = store.peek(compat, prefix, "snapshot")
            if meta is not None and meta.role:
                self.temporary[meta.role] = prefix
            else:
                self.anchor = b

    def _set_mark(self, end: int) -> None:
        self._mark = self.engine.ctx.decode_seconds
        self._mark_pos = end

    def before_decode(self, next_end: int) -> None:
        """Read the windows whose cells the tokens up to ``next_end`` would overwrite."""
        if not self._snapshot_bytes and self.store is not None and self._has_state:
            self._expect_snapshots(next_end)
        if self.ring is None:
            return
        for snap in self.snapshots:
            if snap.state is None and self._overwritten(snap.end, next_end):
                snap.state = self._read_window(snap.end)

    def _expect_snapshots(self, next_end: int) -> None:
        """Before the decode after which the live sequence holds a whole snapshot: its size.

        That decode then has the helper touch a buffer for it (``WarmBuffers``), so the
        first snapshot a prefill reads needs no new memory either: into new memory a
        window's read took 1.2 ms on the development VM, into touched memory 0.6. A
        recurrent state has its size from the first token; a window not yet whole is
        scaled up to ``n_swa`` cells (a little more than it will be: its fixed fields
        scale too, and a larger buffer serves).
        """
        live = len(self.engine.live)
        if live == 0 or (self.ring is not None and next_end < self.engine.n_swa):
            return
        ctx = self.engine.ctx
        size = ctx.state_size(LIVE, self._flags())
        if self.ring is None or live >= self.engine.n_swa:
            self._snapshot_bytes = size  # whole already: exact
            ctx.warm.expect(size)
        else:
            ctx.warm.expect(-(-size * self.engine.n_swa // live))

    def _overwritten(self, end: int, next_end: int) -> bool:
        """Do tokens up to ``next_end`` overwrite a cell of the window at ``end``?

        By the ring's own rule (``SwaRing.overwritten``), which its reads refuse by: a
        window left for ``flush`` is then still there to read.
        """
        assert self.ring is not None
        return self.ring.overwritten(end, next_end - 1)

    # -- reading out -------------------------------------------------------------------

    def _flags(self) -> int:
        return FLAGS_FULL if self.engine.kind is MemoryKind.RECURRENT else FLAGS_PARTIAL

    def _read_now(self) -> np.ndarray:
        t0 = time.perf_counter()
        state = self.engine.ctx.state_read(LIVE, self._flags(), warm=True)
        self._timed(state, t0)
        return state

    def _read_window(self, end: int) -> np.ndarray:
        assert self.ring is not None
        t0 = time.perf_counter()
        window = self.ring.unchecked_window_at(end)  # checked when saved, off the decode's path
        if window is None:
            return EMPTY
        self._timed(window, t0)
        return window

    def _timed(self, state: np.ndarray, t0: float) -> None:
        self.policy.timed(len(state), time.perf_counter() - t0)
        self._snapshot_bytes = max(self._snapshot_bytes, len(state))

    def flush(self) -> None:
        """Read out everything noted and hand it to the store (after the reply)."""
        self._reply_hasher = None
        if not self.ranges and not self.snapshots:
            return
        t0 = time.perf_counter()
        store, engine = self.store, self.engine
        assert store is not None
        for start, end, prefix, parent in self.ranges:
            if store.has(engine.compat, prefix, "cells"):
                continue
            blob = engine.ctx.read_range(start, end)
            self.cells_bytes_per_token = len(blob) / (end - start)
            store.put(Segment(engine.compat, prefix, parent, start, end, blob))
        for snap in self.snapshots:
            self._save_snapshot(snap)
        self.ranges.clear()
        self.snapshots.clear()
        engine.deferred_seconds += time.perf_counter() - t0

    def _save_snapshot(self, snap: _Snapshot) -> None:
        engine, store = self.engine, self.store
        assert store is not None
        state = snap.state
        if state is None:
            if self.ring is not None:
                state = self._read_window(snap.end)
            elif self._has_state and snap.end == len(engine.live):
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
        nbytes = len(state) + (len(logits) if logits is not None else 0)
        gap = max(0, snap.end - self.anchor) * self.cells_bytes_per_token
        anchor = self.policy.persist(int(gap), nbytes)
        disk_role = "" if anchor or snap.role == "spaced" else snap.role
        segment = Segment(engine.compat, snap.prefix, None, snap.end, snap.end, state, logits, kind="snapshot",
                          role=disk_role)
        store.put(segment, persist=anchor or bool(disk_role))
        if anchor:
            for role in list(self.temporary):
                if self.temporary[role] == snap.prefix:
                    # The same file, now kept for good here: the writer writes it again
                    # with no role (``DiskTier.save``), so a later process keeps it too.
                    del self.temporary[role]
                else:
                    self._drop_temporary(role)
            self.anchor = snap.end
        elif snap.role != "spaced":
            self._keep_temporary(snap.role, snap.prefix)

    def _keep_temporary(self, role: Role, prefix: str) -> None:
        """The latest prompt end or tip is on disk: the previous one of the branch leaves it.

        Snapshots stay on disk at a spacing (``SnapshotPolicy.persist``) plus the latest
        prompt end and tip of each branch; older ones, now inside the branch, would make
        one or two per turn.
        """
        if self.temporary.get(role) != prefix:
            self._drop_temporary(role)
        self.temporary[role] = prefix

    def _drop_temporary(self, role: Role) -> None:
        prefix = self.temporary.pop(role, None)
        if prefix is not None and self.store is not None:
            self.store.drop_from_disk(self.engine.compat, prefix, "snapshot")
