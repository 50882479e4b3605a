"""Choose the cheapest exact way to put a branch's tokens into the live sequence.

Pure logic, no llama.cpp: given what the live sequence holds, the target branch's tokens,
the positions where that branch is cut into segments, and which checkpoints the store
has, return a ``Plan`` the UI can show before anything runs.

A state at a boundary has two parts: the attention cells of every token before it
(``cells`` checkpoints, one per range, restored root first) and, for models that keep
more than attention cells, what they keep besides — the sliding window or the recurrent
state — which only a ``snapshot`` taken at exactly that boundary can give back. So a
route is: keep a prefix of the live sequence (cutting it back where the memory kind
allows, or rewinding it with a snapshot), restore the cells of the ranges after it,
restore the snapshot at the last of them, and decode the rest.

Exactness rules this encodes (see ``shared/notes/llama-cpp-state.md``):

- The live sequence may be cut back only where the memory kind allows it: always for
  plain attention; for sliding-window caches while the window still holds the cut
  (``pos_min <= p - n_swa``), or anywhere with a snapshot there; for hybrid memory only
  with a snapshot there; recurrent memory only restores whole states.
- Work starts and stops at segment boundaries only, and every route decodes the same
  token ranges in the same batches, so every route lands on the same bits.
- Logits at the very end of the target come from the live context, from a snapshot saved
  with its logits, or from decoding the last segment again: never from a partial decode.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from sessions.checkpoints.segment import Tier
from sessions.llama.decode_speeds import DecodeSpeeds
from sessions.memory_kind import MemoryKind


@dataclass(frozen=True)
class SegmentInfo:
    """What the store says about the cells of the range ending at a boundary."""

    start: int
    end: int
    tier: Tier
    nbytes: int = 0


@dataclass(frozen=True)
class SnapshotInfo:
    """What the store says about the snapshot at a boundary."""

    end: int
    tier: Tier
    has_state: bool
    has_logits: bool
    nbytes: int = 0
    parts: tuple[tuple[int, int], ...] = ()
    """The segments ``(start, end)`` whose kept pieces make up a sliding window here,
    newest first (``swa_ring``); empty for a snapshot that stands alone."""


@dataclass(frozen=True)
class LiveState:
    tokens: Sequence[int]
    pos_min: int
    """Oldest position still held for the live sequence (-1 when empty)."""
    has_logits: bool
    """Whether the logits after the last live token are kept."""


STEP_PRIOR = 4.0
"""Until one kind of call has been timed: a token decoded alone costs about four in a batch."""


@dataclass(frozen=True)
class CostModel:
    """Seconds per token and per byte restored, updated from measurements by the engine.

    A plan prices every token it evaluates at ``eval_per_token`` (the planner does not know
    which are replayed one by one); ``step_seconds`` is the cost of one such replayed token,
    for whoever does (the controller's switch estimate).
    """

    eval_per_token: float = 2e-3
    step_seconds: float = STEP_PRIOR * 2e-3
    ram_seconds_per_byte: float = 1 / 4e9
    disk_seconds_per_byte: float = 1 / 1e9
    measured: bool = False
    """Whether the decode rates come from this engine's own calls (not the defaults)."""

    def restore_seconds(self, part: SegmentInfo | SnapshotInfo) -> float:
        rate = self.ram_seconds_per_byte if part.tier == "ram" else self.disk_seconds_per_byte
        return part.nbytes * rate


def with_speeds(cost: CostModel, speeds: DecodeSpeeds) -> CostModel:
    """``cost`` with its decode rates taken from ``speeds`` (the ones not yet measured
    follow from the other by ``STEP_PRIOR``, or stay at the defaults)."""
    batched, step = speeds.batched, speeds.step
    if batched is None and step is None:
        return cost
    if batched is None:
        assert step is not None
        batched = step / STEP_PRIOR
    if step is None:
        step = batched * STEP_PRIOR
    return replace(cost, eval_per_token=batched, step_seconds=step, measured=True)


@dataclass(frozen=True)
class Plan:
    keep: int
    """Live tokens kept; the live sequence is cut back to this (0 = cleared)."""
    restore: tuple[SegmentInfo, ...]
    """Cells restored after ``keep``, root first."""
    evaluate_from: int
    """Tokens ``target[evaluate_from:]`` are decoded."""
    target_len: int
    logits_source: Literal["live", "snapshot", "decode", "none"]
    """Where the logits after the last token come from ("none": not asked for, and none
    at hand: a switch that only shows a branch need not decode its last message again)."""
    estimate_seconds: float = 0.0
    live_len: int = 0
    rewind: SnapshotInfo | None = None
    """A snapshot at ``keep`` that puts the window or recurrent state back after a cut."""
    snapshot: SnapshotInfo | None = None
    """The snapshot restored at ``evaluate_from`` (its state and/or its logits)."""
    notes: tuple[str, ...] = field(default=())
    cost: CostModel = CostModel()
    """The rates ``estimate_seconds`` was priced at."""

    @property
    def tokens_kept(self) -> int:
        return self.keep

    @property
    def tokens_restored(self) -> int:
        """Tokens whose state comes from checkpoints rather than the live sequence."""
        if self.restore or (self.snapshot is not None and self.snapshot.has_state):
            return self.evaluate_from - self.keep
        return 0

    @property
    def bytes_restored(self) -> int:
        extra = [s.nbytes for s in (self.rewind, self.snapshot) if s is not None]
        return sum(s.nbytes for s in self.restore) + sum(extra)

    @property
    def tokens_to_evaluate(self) -> int:
        return self.target_len - self.evaluate_from

    @property
    def clears(self) -> bool:
        return self.keep == 0 and self.live_len > 0


_CHUNK = 256


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the prefix ``a`` and ``b`` share.

    Compared a chunk at a time (slices compare in C), then token by token inside the
    first chunk that differs: every turn plans against a live branch of thousands of
    tokens, where a loop over all of them costs more than the rest of the plan.
    """
    if not (isinstance(a, list) and isinstance(b, list)):  # slices of other sequences compare otherwise
        a, b = list(a), list(b)
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i : i + _CHUNK] == b[i : i + _CHUNK]:
        i += _CHUNK
    while i < n and a[i] == b[i]:
        i += 1
    return min(i, n)


def cut_allowed(kind: MemoryKind, n_swa: int, live: LiveState, p: int) -> bool:
    """May the live sequence be cut back to length ``p`` and stay exact, with no snapshot?"""
    if p == len(live.tokens) or p == 0:
        return True
    if kind is MemoryKind.PLAIN:
        return True
    if kind is MemoryKind.SWA:
        # The next token at position p attends to (p - n_swa, p): those cells must still
        # be held. llama.cpp accepts the cut either way and then computes wrong logits.
        return 0 <= live.pos_min <= max(0, p - n_swa)
    return False  # hybrid and recurrent state cannot go back


CellsLookup = Callable[[int], SegmentInfo | None]
SnapshotLookup = Callable[[int], SnapshotInfo | None]


def plan_route(
    kind: MemoryKind,
    n_swa: int,
    live: LiveState,
    target: Sequence[int],
    boundaries: Sequence[int],
    cells: CellsLookup,
    snapshot: SnapshotLookup,
    cost: CostModel = CostModel(),
    *,
    need_logits: bool = True,
    splittable: Callable[[int], bool] = lambda _k: True,
) -> Plan:
    """Return the plan that evaluates the fewest tokens (then costs the least).

    Without ``need_logits`` a route may end with no logits, unless they come with it.
    ``splittable(k)``: whether decoding may start at token ``k`` of the target where it is
    no boundary. A rebuild decodes each segment from its start, in the same batches every
    time. Started elsewhere, the batches differ: a last token decoded alone gets other last
    bits than in a batch (the cut route below), and on a GPU the kernels change with a
    batch's size. Only inside a reply replayed one token at a time (``stepped``) is every
    start the same. So a route that keeps what is live past the last boundary, or cuts it
    between two, and decodes from there is taken only where this says so
    (``BranchEngine.prepare`` knows the stepped messages; an estimate alone may take
    every start).
    """
    if not boundaries or boundaries[-1] != len(target):
        raise ValueError("boundaries must end at the target's length")
    # Each start walks the chain after it, so without these a branch of n boundaries
    # asks the store about n**2 / 2 of them.
    cells, snapshot = functools.cache(cells), functools.cache(snapshot)
    best: tuple[tuple[int, float, int], Plan] | None = None
    for plan in _candidates(kind, n_swa, live, target, boundaries, cells, snapshot, need_logits, splittable):
        seconds = _estimate(plan, cost)
        key = (plan.tokens_to_evaluate, seconds, -plan.keep)
        if best is None or key < best[0]:
            best = key, plan
    assert best is not None  # clearing and decoding everything always qualifies
    return replace(best[1], estimate_seconds=best[0][1], cost=cost)


def _candidates(kind: MemoryKind, n_swa: int, live: LiveState, target: Sequence[int], boundaries: Sequence[int],
                cells: CellsLookup, snapshot: SnapshotLookup, need_logits: bool,
                splittable: Callable[[int], bool]) -> Iterator[Plan]:
    n_live, n = len(live.tokens), len(target)
    c = common_prefix(live.tokens, target)
    def plan(keep: int, restore: tuple[SegmentInfo, ...], evaluate_from: int, *,
             rewind: SnapshotInfo | None = None, snapshot: SnapshotInfo | None = None) -> Plan:
        return Plan(keep=keep, restore=restore, evaluate_from=evaluate_from, target_len=n,
                    logits_source="decode", live_len=n_live, rewind=rewind, snapshot=snapshot)

    starts: list[tuple[int, SnapshotInfo | None]] = [(0, None)]  # (keep, rewind snapshot)
    if c == n_live and n_live and (n_live == n or n_live in boundaries or splittable(n_live)):
        starts.append((n_live, None))
    for k in boundaries:
        if 0 < k <= c and k < n_live:
            if kind is not MemoryKind.RECURRENT and cut_allowed(kind, n_swa, live, k):
                starts.append((k, None))
            elif kind in (MemoryKind.SWA, MemoryKind.HYBRID):
                snap = snapshot(k)
                if snap is not None and snap.has_state:
                    starts.append((k, snap))
    # A target that ends inside what is live (a reply cut to continue from a place in it):
    # where the cells can be cut anywhere, keep all but its last token, whose decode
    # gives the logits to go on from.
    last = n - 1
    if (need_logits and 0 < last < n_live and n <= c and last not in boundaries and splittable(last)
            and kind is not MemoryKind.RECURRENT and cut_allowed(kind, n_swa, live, last)):
        starts.append((last, None))
    for keep, rewind in starts:
        if kind is MemoryKind.RECURRENT:
            yield from _recurrent(keep, live, boundaries, snapshot, plan, need_logits)
            continue
        chain: list[SegmentInfo] = []
        reach = keep
        points: list[tuple[int, SnapshotInfo | None]] = [(keep, None)]  # (end of the cells, snapshot there)
        for b in boundaries:
            if b <= keep:
                continue
            info = cells(b)
            if info is None or info.start != reach:
                break
            chain.append(info)
            reach = b
            snap = snapshot(b)
            if kind is MemoryKind.PLAIN:
                points.append((b, snap if snap is not None and snap.has_logits else None))
            elif snap is not None and snap.has_state:
                points.append((b, snap))
        ends = [info.end for info in chain]
        for end, snap in points:
            restored = tuple(chain[: ends.index(end) + 1]) if end > keep else ()
            finished = _finish(plan(keep, restored, end, rewind=rewind, snapshot=snap), live, need_logits)
            if finished is not None:
                yield finished


def _recurrent(keep: int, live: LiveState, boundaries: Sequence[int], snapshot: SnapshotLookup,
               plan: Callable[..., Plan], need_logits: bool) -> Iterator[Plan]:
    """A recurrent state at a boundary stands for everything before it: one restore."""
    candidates = [plan(keep, (), keep)]
    for b in boundaries:
        snap = snapshot(b)
        if snap is not None and snap.has_state:
            candidates.append(plan(0, (), b, snapshot=snap))
    for candidate in candidates:
        finished = _finish(candidate, live, need_logits)
        if finished is not None:
            yield finished


def _finish(plan: Plan, live: LiveState, need_logits: bool) -> Plan | None:
    """Settle where the logits come from; None when this route cannot give them."""
    if plan.evaluate_from < plan.target_len:
        return plan
    snap = plan.snapshot
    if snap is not None and snap.has_logits:
        return replace(plan, logits_source="snapshot")
    untouched = not plan.restore and plan.rewind is None and snap is None
    if untouched and plan.keep == len(live.tokens) and live.has_logits:
        return replace(plan, logits_source="live")
    if not need_logits:
        return replace(plan, logits_source="none")
    return None  # a shorter route decodes the last segment again


def _estimate(plan: Plan, cost: CostModel) -> float:
    """Seconds the route should take: decoding, and reading what it restores."""
    return plan.tokens_to_evaluate * cost.eval_per_token + restore_seconds(plan, cost)


def restore_seconds(plan: Plan, cost: CostModel) -> float:
    """Seconds reading what ``plan`` restores should take."""
    return sum(cost.restore_seconds(part) for part in (*plan.restore, plan.rewind, plan.snapshot) if part is not None)
