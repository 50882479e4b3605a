"""Put any branch's tokens into the live sequence exactly, evaluating only what is new.

``BranchEngine`` owns the live sequence of one context and knows the tokens it holds.
``prepare`` plans a route (``planner.plan_route``), cuts or clears the live sequence,
restores checkpoint segments root first, then decodes the rest in batches that end at
segment boundaries, saving a segment at each boundary as it goes. ``generate`` samples a
reply one token at a time and saves its segments too, so the next turn, a regenerate or a
switch back finds them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sessions.checkpoints import CheckpointStore, PrefixHasher, Segment, StateCompat, prefix_hash
from sessions.crashpoints import crashpoint
from sessions.engine.context import DecodeCancelled, LlamaContext
from sessions.engine.model import LlamaModel
from sessions.engine.planner import CostModel, LiveState, Plan, SegmentInfo, cut_allowed, plan_route
from sessions.engine.segments import batches, segment_boundaries
from sessions.engine.swa_layout import canonicalize_window
from sessions.memory_kind import MemoryKind

ProgressFn = Callable[[int, int, float], None]
"""(tokens done, tokens to do, tokens per second)"""


@dataclass(frozen=True)
class PrepareResult:
    logits: np.ndarray
    plan: Plan
    tokens_restored: int
    tokens_evaluated: int
    seconds: float


class BranchEngine:
    def __init__(self, model: LlamaModel, ctx: LlamaContext, store: CheckpointStore | None, *, interval: int = 2048):
        self.model = model
        self.ctx = ctx
        self.store = store
        self.interval = interval
        self.kind: MemoryKind = model.info.kind
        self.n_swa = model.info.n_swa
        self.compat = StateCompat(model.info.fingerprint, ctx.params.compat())
        self.live: list[int] = []
        self.live_logits: np.ndarray | None = None
        self.cost = CostModel()

    # -- planning ---------------------------------------------------------------------

    def _live_state(self) -> LiveState:
        pos_min = self.ctx.pos_min() if self.live else -1
        return LiveState(tokens=self.live, pos_min=pos_min, has_logits=self.live_logits is not None)

    def _lookup(self, target: Sequence[int]) -> Callable[[int], SegmentInfo | None]:
        def lookup(b: int) -> SegmentInfo | None:
            if self.store is None:
                return None
            meta = self.store.peek(self.compat, prefix_hash(target[:b]))
            if meta is None or meta.end != b:
                return None
            return SegmentInfo(start=meta.start, end=meta.end, tier=meta.tier, has_logits=meta.has_logits)

        return lookup

    def plan(self, target: Sequence[int], ends: Sequence[int]) -> Plan:
        """What ``prepare`` would do for this branch, without doing it."""
        bounds = segment_boundaries(ends, self.interval)
        return plan_route(self.kind, self.n_swa, self._live_state(), target, bounds, self._lookup(target), self.cost)

    # -- running ----------------------------------------------------------------------

    def prepare(
        self,
        target: Sequence[int],
        ends: Sequence[int],
        *,
        stepped: Sequence[bool] | None = None,
        on_progress: ProgressFn | None = None,
    ) -> PrepareResult:
        """Make the live sequence hold ``target`` and return the logits after its last token.

        ``ends`` are the message end positions; ``stepped[i]`` says message i was a reply
        generated (and so first decoded) one token at a time, which is how it is replayed.
        """
        target = list(target)
        stepped_ranges = [
            (a, b) for a, b, step in zip([0, *ends[:-1]], ends, stepped or [False] * len(ends), strict=True) if step
        ]
        t0 = time.perf_counter()
        plan = self.plan(target, ends)
        bounds = segment_boundaries(ends, self.interval)
        message_ends = set(ends)
        self._cut(plan.keep)
        logits = self.live_logits if plan.logits_source == "live" else None
        for info in plan.restore:
            segment = self.store.get(self.compat, prefix_hash(target[: info.end])) if self.store else None
            if segment is None or segment.start != len(self.live) and self.kind is not MemoryKind.RECURRENT:
                break  # vanished or failed verification: decode from here instead
            if not self.ctx.append_snapshot(segment.state):
                self._reset()  # a failed restore may leave a sub-cache cleared
                break
            self.live = target[: segment.end]
            self.live_logits = None
            if segment.logits is not None:
                logits = np.frombuffer(segment.logits, dtype=np.float32).copy()
                self.live_logits = logits
        self.settle()
        restored = len(self.live) - plan.keep if self.live else 0
        evaluated = len(target) - len(self.live)
        if evaluated:
            logits = self._decode_to(target, bounds, message_ends, stepped_ranges, on_progress)
        elif logits is None:
            raise RuntimeError("plan produced no logits")  # planner guarantees a source
        self._mark_active(target, bounds)
        seconds = time.perf_counter() - t0
        if evaluated:
            self.cost = CostModel(
                eval_per_token=seconds / evaluated,
                restore_ram_per_token=self.cost.restore_ram_per_token,
                restore_disk_per_token=self.cost.restore_disk_per_token,
            )
        return PrepareResult(logits, plan, restored, evaluated, seconds)

    def settle(self) -> None:
        """At a segment boundary: give a sliding-window cache its canonical cell order.

        Every route calls this at every boundary it passes, so the buffer order that the
        next tokens' attention sums over is the same whichever route built the state
        (see ``swa_layout``). Other memory kinds have no ring and need nothing.
        """
        if self.kind is not MemoryKind.SWA or not self.live:
            return
        try:
            canonicalize_window(self.ctx)
        except RuntimeError:
            self._reset()  # the window is gone: the next plan rebuilds from checkpoints

    def _mark_active(self, target: Sequence[int], bounds: Sequence[int]) -> None:
        """Tell the store which segments the user is on: evicted last, after abandoned leaves."""
        if self.store is None:
            return
        hasher, prefixes, pos = PrefixHasher(), [], 0
        for b in bounds:
            prefixes.append(hasher.extend(target[pos:b]).hexdigest())
            pos = b
        self.store.set_active(self.compat, prefixes)

    def _cut(self, keep: int) -> None:
        if keep == len(self.live):
            return
        if keep == 0:
            self._reset()
            return
        if not cut_allowed(self.kind, self.n_swa, self._live_state(), keep) or not self.ctx.seq_rm(0, keep, -1):
            self._reset()
            return
        self.live = self.live[:keep]
        self.live_logits = None

    def _reset(self) -> None:
        self.ctx.clear()
        self.live = []
        self.live_logits = None

    def _decode_to(self, target, bounds, message_ends, stepped_ranges, on_progress) -> np.ndarray:
        start = len(self.live)
        total = len(target) - start
        t0 = time.perf_counter()
        seg_start = max([0] + [b for b in bounds if b <= start])
        logits = None
        for end in (b for b in bounds if b > start):
            step = any(a <= seg_start < b for a, b in stepped_ranges)
            for a, b in batches(len(self.live), end, self.ctx.params.n_batch, stepped=step):
                try:
                    logits = self.ctx.decode(target[a:b], a, want_logits=(b == end), abortable=True)
                except DecodeCancelled:
                    self._recover_to_boundary(seg_start)
                    raise
                self.live = target[:b]
                self.live_logits = None
                crashpoint("decode.batch")
                if on_progress:
                    done = b - start
                    on_progress(done, total, done / max(time.perf_counter() - t0, 1e-9))
            self.live_logits = logits
            self._save(target, seg_start, end, logits if end in message_ends else None)
            self.settle()
            seg_start = end
        assert logits is not None
        return logits

    def _recover_to_boundary(self, boundary: int) -> None:
        """After a cancelled decode, fall back to the last boundary (or clear)."""
        self.ctx.clear_abort()
        if boundary and self.kind in (MemoryKind.PLAIN,) and self.ctx.seq_rm(0, boundary, -1):
            self.live = self.live[:boundary]
            self.live_logits = None
        else:
            self._reset()

    def _save(self, tokens: Sequence[int], start: int, end: int, logits: np.ndarray | None) -> None:
        if self.store is None or end <= start:
            return
        prefix = prefix_hash(tokens[:end])
        if self.store.has(self.compat, prefix):
            return
        state = self.ctx.snapshot_range(start, end)
        self.store.put(
            Segment(
                compat=self.compat,
                prefix=prefix,
                parent=prefix_hash(tokens[:start]) if start else None,
                start=start,
                end=end,
                state=state,
                logits=logits.astype(np.float32).tobytes() if logits is not None else None,
            )
        )


@dataclass(frozen=True)
class GenerateResult:
    tokens: list[int]
    text: str
    stop_reason: str
    """"eog" (the model ended its turn), "length" (max tokens), "cancelled", or "context_full"."""
    first_token_at: float | None
    """perf_counter() when the first token was sampled (None if none was)."""
    seconds: float


def generate(
    engine: BranchEngine,
    logits: np.ndarray,
    sampler,
    *,
    max_tokens: int,
    on_text: Callable[[str], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> GenerateResult:
    """Sample a reply after the live sequence; every non-final token is decoded.

    The end-of-generation token that stops the reply is not decoded: what the chat
    template puts after a reply belongs to the next message. Segments are saved every
    ``interval`` tokens and at the end, with the final logits, so a regenerate of the
    *next* turn or a continuation restores without decoding.
    """
    from sessions.engine.context import ContextFull
    from sessions.engine.detokenizer import Detokenizer

    t0 = time.perf_counter()
    seg_start = len(engine.live)
    tokens: list[int] = []
    detok = Detokenizer(engine.model.piece)
    first: float | None = None
    reason = "length"
    for _ in range(max_tokens):
        if should_stop():
            reason = "cancelled"
            break
        token = sampler.sample(logits)
        if first is None:
            first = time.perf_counter()
        if engine.model.is_eog(token):
            reason = "eog"
            break
        try:
            logits = engine.ctx.decode([token], len(engine.live))
        except ContextFull:
            reason = "context_full"
            break
        except DecodeCancelled:
            # The reply so far stays (its tokens were decoded), but the cache may hold half
            # a token: start clean; the next turn restores from the saved segments.
            engine.ctx.clear_abort()
            engine._reset()
            reason = "cancelled"
            break
        engine.live.append(token)
        engine.live_logits = logits
        tokens.append(token)
        crashpoint("generate.token")
        text = detok.push(token)
        if text and on_text:
            on_text(text)
        if len(engine.live) - seg_start >= engine.interval:
            engine._save(engine.live, seg_start, len(engine.live), None)
            engine.settle()
            seg_start = len(engine.live)
    tail = detok.finish()
    if tail and on_text:
        on_text(tail)
    if len(engine.live) > seg_start and engine.live_logits is not None:
        engine._save(engine.live, seg_start, len(engine.live), engine.live_logits)
        engine.settle()
    return GenerateResult(tokens, detok.text, reason, first, time.perf_counter() - t0)
