"""Choose the cheapest exact way to put a branch's tokens into the live sequence.

Pure logic, no llama.cpp: given what the live sequence holds, the target branch's tokens,
the positions where that branch is cut into segments, and which segments the checkpoint
store has, return a ``Plan`` the UI can show before anything runs.

Exactness rules this encodes (see ``shared/notes/llama-cpp-state.md``):

- The live sequence may be cut back only where the memory kind allows it: always for
  plain attention; for sliding-window caches only while the window has not slid past the
  cut (``pos_min <= p - n_swa``); never for hybrid or recurrent memory, which can only be
  kept whole or cleared.
- Work starts and stops at segment boundaries only. The floating-point state after a
  batch depends on where the batch started and ended, so every route (live reuse,
  restore, from scratch) decodes the same token ranges in the same batches and therefore
  lands on bit-identical logits.
- Logits at the very end of the target come from the live context, from a segment saved
  with its logits, or from decoding the last segment again: never from a partial decode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from sessions.memory_kind import MemoryKind

Tier = Literal["ram", "disk"]


@dataclass(frozen=True)
class SegmentInfo:
    """What the store says about the segment ending at a boundary."""

    start: int
    end: int
    tier: Tier
    has_logits: bool


@dataclass(frozen=True)
class LiveState:
    tokens: Sequence[int]
    pos_min: int
    """Oldest position still held for the live sequence (-1 when empty)."""
    has_logits: bool
    """Whether the logits after the last live token are kept."""


@dataclass(frozen=True)
class CostModel:
    """Seconds per token, updated from measurements by the engine."""

    eval_per_token: float = 2e-3
    restore_ram_per_token: float = 2e-6
    restore_disk_per_token: float = 2e-5


@dataclass(frozen=True)
class Plan:
    keep: int
    """Live tokens kept; the live sequence is cut back to this (0 = cleared)."""
    restore: tuple[SegmentInfo, ...]
    """Segments restored after ``keep``, root first."""
    evaluate_from: int
    """Tokens ``target[evaluate_from:]`` are decoded."""
    target_len: int
    logits_source: Literal["live", "segment", "decode"]
    estimate_seconds: float = 0.0
    live_len: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def tokens_kept(self) -> int:
        return self.keep

    @property
    def tokens_restored(self) -> int:
        """Tokens whose state comes from checkpoints (contiguous after ``keep``)."""
        return self.restore[-1].end - self.keep if self.restore else 0

    @property
    def tokens_to_evaluate(self) -> int:
        return self.target_len - self.evaluate_from

    @property
    def clears(self) -> bool:
        return self.keep == 0 and self.live_len > 0


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def cut_allowed(kind: MemoryKind, n_swa: int, live: LiveState, p: int) -> bool:
    """May the live sequence be cut back to length ``p`` and stay exact?"""
    if p == len(live.tokens) or p == 0:
        return True
    if kind is MemoryKind.PLAIN:
        return True
    if kind is MemoryKind.SWA:
        # The next token at position p attends to (p - n_swa, p): those cells must still
        # be held. llama.cpp accepts the cut either way and then computes wrong logits.
        return 0 <= live.pos_min <= max(0, p - n_swa)
    return False  # hybrid and recurrent state cannot go back


def plan_route(
    kind: MemoryKind,
    n_swa: int,
    live: LiveState,
    target: Sequence[int],
    boundaries: Sequence[int],
    lookup: Callable[[int], SegmentInfo | None],
    cost: CostModel = CostModel(),
) -> Plan:
    """Return the plan that evaluates the fewest tokens (then restores the fewest)."""
    if not boundaries or boundaries[-1] != len(target):
        raise ValueError("boundaries must end at the target's length")
    c = common_prefix(live.tokens, target)
    starts = [0] + [b for b in boundaries if b <= c]
    keeps = [k for k in dict.fromkeys(starts) if k <= c and cut_allowed(kind, n_swa, live, k)]
    later = {k: [b for b in boundaries if b > k] for k in keeps}

    best: Plan | None = None
    for keep in keeps:
        chain = _chain(kind, keep, later[keep], lookup)
        if kind is MemoryKind.RECURRENT and chain:
            keep = 0  # a recurrent restore replaces the whole state
        reach = chain[-1].end if chain else keep
        source: Literal["live", "segment", "decode"] = "decode"
        if reach == len(target):
            if chain and chain[-1].has_logits:
                source = "segment"
            elif not chain and keep == len(live.tokens) and live.has_logits:
                source = "live"
            else:  # no logits at the end: decode the last segment again
                while chain and reach == len(target):
                    chain.pop()
                    reach = chain[-1].end if chain else keep
                if reach == len(target):
                    continue  # this keep point cannot give logits; a shorter one will
        plan = Plan(
            keep=keep,
            restore=tuple(chain),
            evaluate_from=reach,
            target_len=len(target),
            logits_source=source,
            live_len=len(live.tokens),
        )
        plan = _with_estimate(plan, cost)
        if best is None or _better(plan, best):
            best = plan
    assert best is not None  # keep = 0 with nothing restored always qualifies
    return best


def _chain(kind: MemoryKind, keep: int, later: list[int], lookup) -> list[SegmentInfo]:
    if kind is MemoryKind.RECURRENT:
        # The recurrent state at a boundary stands for everything before it: only the
        # deepest saved segment is needed.
        for b in reversed(later):
            info = lookup(b)
            if info is not None:
                return [info]
        return []
    chain: list[SegmentInfo] = []
    pos = keep
    for b in later:
        info = lookup(b)
        if info is None or info.start != pos:
            break
        chain.append(info)
        pos = b
    return chain


def _with_estimate(plan: Plan, cost: CostModel) -> Plan:
    restore = 0.0
    pos = plan.keep
    for s in plan.restore:
        per_token = cost.restore_ram_per_token if s.tier == "ram" else cost.restore_disk_per_token
        restore += (s.end - pos) * per_token
        pos = s.end
    seconds = restore + plan.tokens_to_evaluate * cost.eval_per_token
    return Plan(**{**plan.__dict__, "estimate_seconds": seconds})


def _better(a: Plan, b: Plan) -> bool:
    key = lambda p: (p.tokens_to_evaluate, p.estimate_seconds, -p.keep)  # noqa: E731
    return key(a) < key(b)
