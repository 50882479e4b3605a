"""Put any branch's tokens into the live sequence exactly, evaluating only what is new.

``BranchEngine`` owns the live sequence of one context and knows the tokens it holds.
``prepare`` plans a route (``planner.plan_route``), cuts, rewinds or clears the live
sequence, restores checkpoints root first, then decodes the rest in batches that end at
segment boundaries. ``generate`` samples a reply one token at a time.

Nothing on the way to the first token waits for checkpoint bookkeeping: the decode loop
only notes which ranges it passed (``Captures``); their attention cells are read out
after the reply (or after a switch), when the user is reading, and the disk writes happen
on the store's own thread. The one thing that cannot wait is a recurrent state, which the
next token overwrites; a sliding window waits too, since its cells stay in the ring for a
while (``swa_ring``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from sessions.branching.captures import Captures, prefix_hashes
from sessions.branching.live import LiveSequence
from sessions.branching.planner import (
    CostModel,
    LiveState,
    Plan,
    SegmentInfo,
    SnapshotInfo,
    plan_route,
    with_speeds,
)
from sessions.branching.restore import RouteRunner
from sessions.branching.segments import batches, segment_boundaries
from sessions.branching.snapshot_policy import SnapshotPolicy, segment_interval
from sessions.branching.warm_ahead import WarmedAhead, route_parts, warm_parts
from sessions.checkpoints import CheckpointStore, Kind, StateCompat, Tier
from sessions.crashpoints import crashpoint
from sessions.errors import DecodeCancelled
from sessions.llama.batch_fill import TokenIds
from sessions.llama.context import ContextFull, LlamaContext
from sessions.llama.detokenizer import Detokenizer
from sessions.llama.model import LlamaModel
from sessions.llama.state_blob import SectionShape
from sessions.memory_kind import MemoryKind
from sessions.stop_reason import StopReason

log = logging.getLogger(__name__)

ProgressFn = Callable[[int, int, float], None]
"""(tokens done, tokens to do, tokens per second)"""


@dataclass(frozen=True)
class PrepareResult:
    logits: np.ndarray | None
    """After the last token; None only when they were not asked for (``need_logits``)."""
    plan: Plan
    tokens_restored: int
    tokens_evaluated: int
    seconds: float
    bytes_restored: int = 0
    """Checkpoint bytes put back into the context."""
    tokens_unparked: int = 0
    """Of ``tokens_restored``, those put back from a branch parked in the model's memory
    (``LiveSequence.unpark_for``: no bytes of it through the host)."""
    decode_seconds: float = 0.0
    """Of ``seconds``, the time inside ``llama_decode``; the rest is this engine's own work."""
    overhead_cpu_seconds: float = 0.0
    """CPU time this thread spent outside ``llama_decode``: the engine's own work, as a
    figure that other programs competing for the CPU do not inflate."""
    state_seconds: float = 0.0
    """Of ``seconds``, the time inside llama.cpp's state reads and writes (restores, and
    snapshots read on the decode's path)."""

    @property
    def overhead_seconds(self) -> float:
        return max(0.0, self.seconds - self.decode_seconds)


@dataclass(frozen=True)
class GenerateResult:
    tokens: list[int]
    text: str
    stop_reason: StopReason
    first_token_at: float | None
    """perf_counter() when the first token was sampled (None if none was)."""
    seconds: float


def _continued_from(ends: Sequence[int], stepped: Sequence[bool] | None, interval: int) -> int:
    """Where the first segment of a reply generated after a branch ending at ``ends`` starts.

    After a prompt, at its end. After a generated reply (``stepped[-1]``: the reply is
    being continued), at the last segment boundary of that reply that stays one in the
    longer version: ``segment_boundaries`` cuts a message from its own start, so the end
    of the shorter version is no boundary there. Segments cut that way are the ones a
    later process looks for (checkpoints are found by their boundaries); cut at the old
    end instead, a reopened continued reply was replayed token by token.
    """
    end = ends[-1] if ends else 0
    if not stepped or not stepped[-1]:
        return end
    start = ends[-2] if len(ends) > 1 else 0
    return start + (end - start) // interval * interval


def _stepped_ranges(ends: Sequence[int], stepped: Sequence[bool] | None) -> list[tuple[int, int]] | None:
    """The token ranges of the messages replayed one token at a time (None: not known)."""
    if stepped is None:
        return None
    return [(a, b) for a, b, step in zip([0, *ends[:-1]], ends, stepped, strict=True) if step]


CONTINUABLE = frozenset({StopReason.LENGTH, StopReason.CANCELLED, StopReason.CONTEXT_FULL})
"""Replies that may be continued later: the logits after their last token are kept."""


class BranchEngine:
    def __init__(
        self,
        model: LlamaModel,
        ctx: LlamaContext,
        store: CheckpointStore | None,
        *,
        interval: int = 2048,
        policy: SnapshotPolicy | None = None,
        parking: int = 0,
    ):
        """``parking``: most bytes of the model's memory that branches left for another may
        keep there whole (``LiveSequence``: 0, none)."""
        self.model = model
        self.ctx = ctx
        self.store = store
        self.kind: MemoryKind = model.info.kind
        self.n_swa = model.info.n_swa
        self.interval = segment_interval(interval, self.kind, self.n_swa)
        """Where long messages are cut into segments: ``interval``, or closer for a window
        or recurrent state (``restart_spacing``), each cut with a snapshot."""
        self.compat = StateCompat(model.info.fingerprint, ctx.params.compat())
        self.seq = LiveSequence(ctx, self.kind, self.n_swa, parking=parking)
        """The live sequence: what the context holds (``live``), and the one place that changes it."""
        self.ring = self.seq.ring
        self.cost = CostModel()
        self.policy = policy or SnapshotPolicy()
        self.captures = Captures(self, store, self.policy)
        self.runner = RouteRunner(self)
        self._reply_from = (0, 0)
        self._continuing = False
        """(live length ``prepare`` left, where the segment a reply after it adds starts)."""
        self.deferred_seconds = 0.0
        """Time spent reading checkpoints out after the replies (off the path to a token)."""
        self._told: set[str] = set()
        """The kinds of checkpoint trouble already told (``checkpoint_trouble``)."""

    @property
    def live(self) -> list[int]:
        """The tokens the live sequence holds exactly."""
        return self.seq.tokens

    @live.setter
    def live(self, tokens: list[int]) -> None:
        self.seq.hold(tokens)  # (tests that set up a state by hand)

    @property
    def live_logits(self) -> np.ndarray | None:
        """The logits after the last live token, when kept."""
        return self.seq.logits

    @property
    def cells_shape(self) -> SectionShape | None:
        return self.seq.cells_shape

    # -- planning ---------------------------------------------------------------------

    def _live_state(self, target: Sequence[int] | None = None) -> LiveState:
        """What the live sequence holds; for an estimate of going to ``target``, the parked
        branch that ``prepare`` would put back first, when there is one (a copy within the
        model's memory, which the plan prices at nothing)."""
        parked = self.seq.parked_for(target) if target is not None else None
        if parked is not None:
            branch = self.seq.parked[parked]
            return LiveState(tokens=branch.tokens, pos_min=0, has_logits=branch.logits is not None)
        # (cells before a restored window are filler: ``LiveSequence.pos_min`` counts from its real cells)
        return LiveState(tokens=self.live, pos_min=self.seq.pos_min(), has_logits=self.live_logits is not None)

    def plan(self, target: Sequence[int], ends: Sequence[int], *, need_logits: bool = True,
             stepped: Sequence[bool] | None = None) -> Plan:
        """What ``prepare`` would do for this branch (with ``stepped`` as ``prepare`` takes
        it), without doing it."""
        bounds = segment_boundaries(ends, self.interval)
        return self._plan(target, bounds, prefix_hashes(target, bounds), need_logits,
                          stepped_ranges=_stepped_ranges(ends, stepped), estimate=True)

    def warm_ahead(self, target: Sequence[int], ends: Sequence[int], should_stop: Callable[[], bool], *,
                   planned: Callable[[], None] | None = None) -> WarmedAhead:
        """Read the checkpoints a switch to ``target`` would restore from disk into RAM
        (``warm_ahead``), and those a reply there would restore besides (the logits at
        its end); the live sequence is only looked at, by the plans, before ``planned``
        is called: the reads after it touch the checkpoint store alone."""
        bounds = segment_boundaries(ends, self.interval)
        prefixes = prefix_hashes(target, bounds)
        parts = []
        for need_logits in (False, True):  # the switch, then a reply or regenerate there
            plan = self._plan(target, bounds, prefixes, need_logits, disk_as_ram=True, estimate=True)
            parts += [part for part in route_parts(plan, prefixes) if part not in parts]
        if planned is not None:
            planned()
        return warm_parts(self.store, self.compat, parts, should_stop)

    def _plan(
        self, target: Sequence[int], bounds: Sequence[int], prefixes: dict[int, str], need_logits: bool = True,
        *, disk_as_ram: bool = False, stepped_ranges: Sequence[tuple[int, int]] | None = None,
        estimate: bool = False,
    ) -> Plan:
        """``disk_as_ram``: price what is on disk as if it were in RAM (the route a warm
        ahead makes cheapest). ``stepped_ranges``: the messages replayed one token at a
        time, the only places where decoding may start between boundaries (``plan_route``'s
        ``splittable``); None, for an estimate, lets it start anywhere. ``estimate``: plan
        from the parked branch ``prepare`` would put back first, when there is one."""
        store, compat = self.store, self.compat
        cost = with_speeds(self.cost, self.ctx.speeds)
        if disk_as_ram:
            cost = replace(cost, disk_seconds_per_byte=cost.ram_seconds_per_byte)

        def cells(b: int) -> SegmentInfo | None:
            meta = store.peek(compat, prefixes[b], "cells") if store is not None else None
            if meta is None or meta.end != b:
                return None
            return SegmentInfo(meta.start, meta.end, meta.tier, meta.nbytes)

        def snapshot(b: int) -> SnapshotInfo | None:
            meta = store.peek(compat, prefixes[b], "snapshot") if store is not None else None
            if meta is None or meta.end != b:
                return None
            info = SnapshotInfo(b, meta.tier, meta.has_state, meta.has_logits, meta.nbytes)
            return window_of(info) if self.ring is not None and meta.has_state else info

        def window_of(newest: SnapshotInfo) -> SnapshotInfo | None:
            """The window at a boundary from the pieces of the segments that end within
            ``n_swa`` tokens before it (``swa_ring``): found only when all are kept."""
            assert store is not None  # a snapshot was found
            at = bounds.index(newest.end)
            low = max(0, newest.end - self.n_swa)
            parts, nbytes, tier = [], 0, newest.tier
            for k in range(at, -1, -1):
                end, start = bounds[k], bounds[k - 1] if k else 0
                meta = newest if k == at else store.peek(compat, prefixes[end], "snapshot")
                if meta is None or meta.end != end or not meta.has_state:
                    return None
                parts.append((start, end))
                nbytes += meta.nbytes
                tier = "disk" if meta.tier == "disk" else tier
                if start <= low:
                    break
            return replace(newest, tier=tier, nbytes=nbytes, parts=tuple(parts))

        def splittable(k: int) -> bool:
            return stepped_ranges is None or any(a < k < b for a, b in stepped_ranges)

        live = self._live_state(target if estimate else None)
        return plan_route(self.kind, self.n_swa, live, target, bounds, cells, snapshot, cost,
                          need_logits=need_logits, splittable=splittable)

    def saved_tier(self, prefix: str) -> Tier | None:
        """Where the checkpoint that restores a branch ending after the tokens with this
        hash without decoding is kept (None: nowhere); an index lookup, no disk read."""
        if self.store is None:
            return None
        kind: Kind = "cells" if self.kind is MemoryKind.PLAIN else "snapshot"
        return self.store.where(self.compat, prefix, kind)

    # -- running ----------------------------------------------------------------------

    def prepare(
        self,
        target: Sequence[int],
        ends: Sequence[int],
        *,
        stepped: Sequence[bool] | None = None,
        on_progress: ProgressFn | None = None,
        reply_follows: bool = False,
        need_logits: bool = True,
    ) -> PrepareResult:
        """Make the live sequence hold ``target`` and return the logits after its last token.

        ``ends`` are the message end positions; ``stepped[i]`` says message i was a reply
        generated (and so first decoded) one token at a time, which is how it is replayed.
        With ``reply_follows`` the checkpoints of what was decoded are read out after the
        reply (``generate``) instead of now, so the first token does not wait for them.
        Without ``need_logits`` (a switch that only shows the branch) a branch whose
        checkpoints reach its end is restored without decoding its last message again
        for logits nobody asked for.
        """
        target = list(target)
        t0, d0, s0 = time.perf_counter(), self.ctx.decode_seconds, self.ctx.state_seconds
        c0, dc0 = time.thread_time(), self.ctx.decode_cpu_seconds
        self.captures.flush()  # whatever an interrupted job left, before the live sequence changes
        stepped_ranges = _stepped_ranges(ends, stepped or [False] * len(ends))
        bounds = segment_boundaries(ends, self.interval)
        prefixes = prefix_hashes(target, bounds)
        unparked = len(self.live) if self.seq.unpark_for(target) else 0
        if unparked:
            self.captures.decoding_from(unparked)
        plan = self._plan(target, bounds, prefixes, need_logits, stepped_ranges=stepped_ranges)
        if plan.keep < len(self.live):
            self.seq.park()  # the branch left behind, kept whole for going back
        logits, restored_bytes = self.runner.run(plan, target, prefixes)
        unparked = min(unparked, plan.keep)
        restored = max(0, len(self.live) - plan.keep) + unparked if self.live else 0
        evaluated = len(target) - len(self.live)
        if evaluated:
            logits = self._decode_to(target, bounds, set(ends), stepped_ranges, prefixes, on_progress)
        elif logits is None and need_logits:
            raise RuntimeError("plan produced no logits")  # planner guarantees a source
        self.seq.keep_logits(logits)
        self._reply_from = (len(target), _continued_from(ends, stepped, self.interval))
        self._continuing = bool(stepped and stepped[-1])  # a generated reply, to be continued
        last_start = max((b for b in prefixes if b < len(target)), default=0)
        self.captures.note_end(last_start, len(target), prefixes[len(target)], logits)
        self._mark_active(prefixes)
        seconds = time.perf_counter() - t0
        decode = self.ctx.decode_seconds - d0
        own_cpu = time.thread_time() - c0 - (self.ctx.decode_cpu_seconds - dc0)
        self._learn(plan, evaluated, restored_bytes, seconds - decode)
        if not reply_follows:
            self.captures.flush()
        return PrepareResult(logits, plan, restored, evaluated, seconds, restored_bytes, unparked, decode, own_cpu,
                             self.ctx.state_seconds - s0)

    def _learn(self, plan: Plan, evaluated: int, restored_bytes: int, other: float) -> None:
        """Price later restores at the speed seen in one that decoded nothing (its time is
        all reading); decoding is priced from the context's own calls (``with_speeds``)."""
        ram, disk = self.cost.ram_seconds_per_byte, self.cost.disk_seconds_per_byte
        if restored_bytes >= 1 << 20 and not evaluated:
            per_byte = other / restored_bytes
            if all(part.tier == "ram" for part in plan.restore):
                ram = per_byte
            else:
                disk = per_byte
        self.cost = replace(self.cost, ram_seconds_per_byte=ram, disk_seconds_per_byte=disk)

    def _mark_active(self, prefixes: dict[int, str]) -> None:
        """Tell the store which checkpoints the user is on: evicted last, after abandoned leaves."""
        if self.store is not None:
            self.store.set_active(self.compat, prefixes.values())

    def checkpoint_trouble(self, what: str, error: Exception) -> None:
        """Say once per kind of trouble that a checkpoint could not be taken or used; the
        engine goes on without it (``sessions.branching.errors``)."""
        log.warning("%s: %s", what, error)
        if what in self._told:
            return
        self._told.add(what)
        if self.store is not None:
            self.store.report(f"{what} ({error}); what it held is evaluated again instead, exactly")

    def _reset(self) -> None:
        self.seq.reset()

    def _decode_to(self, target, bounds, message_ends, stepped_ranges, prefixes, on_progress) -> np.ndarray:
        """Decode ``target`` past the live sequence, batch by batch, noting checkpoints.

        The batch that ends a message inside the prompt also returns the logits after it:
        they are kept with the snapshot there, so that a regenerate of the reply that
        follows samples its first token without decoding anything. They cost one row of
        the output layer, and the arithmetic of every other token stays the same.
        """
        start = len(self.live)
        total = len(target) - start
        t0 = time.perf_counter()
        seg_start = max([0] + [b for b in bounds if b <= start])
        logits = None
        ids = TokenIds(target)  # batches are copied from it (``batch_fill``)
        self.captures.decoding_from(start)
        ahead = [b for b in bounds if b > start]
        self.captures.plan_reads(list(zip([seg_start, *ahead], ahead, strict=False)), len(target), prefixes)
        for end, next_end in zip(ahead, [*ahead[1:], len(target)], strict=True):
            step = any(a <= seg_start < b for a, b in stepped_ranges)
            ends_message = end in message_ends and end < len(target)
            for a, b in batches(len(self.live), end, self.ctx.params.n_batch, stepped=step):
                self.captures.before_decode(b)
                want = b == len(target) or (ends_message and b == end)
                try:
                    logits = self.ctx.decode_span(ids, a, b, want_logits=want, abortable=True)
                except DecodeCancelled:
                    self._recover_to_boundary(seg_start)
                    raise
                self.seq.extend(target[a:b])
                crashpoint("decode.batch")
                if on_progress:
                    done = b - start
                    on_progress(done, total, done / max(time.perf_counter() - t0, 1e-9))
            self.captures.note_range(seg_start, end, prefixes)
            if end < len(target):
                self.captures.maybe_snapshot(seg_start, end, prefixes[end], until=len(target), next_end=next_end,
                                             logits=logits if ends_message else None)
            seg_start = end
        assert logits is not None
        return logits

    def _recover_to_boundary(self, boundary: int) -> None:
        """After a cancelled decode, keep what was complete and fall back to a boundary."""
        self.ctx.clear_abort()
        self.captures.flush()  # ranges before the stopped batch are intact
        if boundary and self.kind is MemoryKind.PLAIN and self.ctx.seq_rm(0, boundary, -1):
            self.seq.cut(boundary)
        else:
            self._reset()

    # -- generating -------------------------------------------------------------------

    def generate(
        self,
        logits: np.ndarray,
        sampler,
        *,
        max_tokens: int,
        on_text: Callable[[str], None] | None = None,
        should_stop: Callable[[], bool] = lambda: False,
        save: bool = True,
    ) -> GenerateResult:
        """Sample a reply after the live sequence; every non-final token is decoded.

        The end-of-generation token that stops the reply is not decoded: what the chat
        template puts after a reply belongs to the next message. Afterwards the
        checkpoints of the prompt and the reply are read out (``Captures.flush``), or,
        without ``save``, left for ``save_checkpoints`` once the reply is stored (the
        next ``prepare`` reads them out otherwise).
        """
        t0 = time.perf_counter()
        began = len(self.live)
        prepared, reply_from = self._reply_from
        seg_start = reply_from if prepared == began else began  # before ``began`` in a continuation
        tokens: list[int] = []
        detok = Detokenizer(self.model.piece)
        if prepared == began and self._continuing:
            detok.prime(self.live[max(0, began - 4):began])  # a character the cut reply left unfinished
        first: float | None = None
        reason = StopReason.LENGTH
        try:
            for _ in range(max_tokens):
                if should_stop():
                    reason = StopReason.CANCELLED
                    break
                token = sampler.sample(logits, output_of=self.ctx if tokens else None)  # after a decode: its logits
                if first is None:
                    first = time.perf_counter()
                if self.model.is_eog(token):
                    reason = StopReason.EOG
                    break
                self.captures.before_decode(len(self.live) + 1)
                try:
                    step = self.ctx.decode([token], len(self.live))
                except ContextFull:
                    reason = StopReason.CONTEXT_FULL
                    break
                assert step is not None  # logits are asked for
                logits = step
                self.seq.extend([token], logits)
                tokens.append(token)
                crashpoint("generate.token")
                text = detok.push(token)
                if text and on_text:
                    on_text(text)
                if len(self.live) - seg_start >= self.interval:
                    self.captures.note_reply_range(seg_start, self.live, last=False)
                    seg_start = len(self.live)
            tail = detok.finish()
            if tail and on_text:
                on_text(tail)
        finally:
            if len(self.live) > max(seg_start, began):
                self.captures.note_reply_range(seg_start, self.live, last=True)
            if len(self.live) > max(seg_start, began) or tokens:
                keep_logits = reason in CONTINUABLE
                self.captures.note_tip(seg_start if len(self.live) > seg_start else began, self.live,
                                       self.live_logits if keep_logits else None)
            if save:
                self.captures.flush()
        return GenerateResult(tokens, detok.text, reason, first, time.perf_counter() - t0)
