"""The live sequence of one context: what it holds exactly, and the only place that changes it.

A branch is made live by cutting, restoring and decoding, in several modules: the route's
restores (``restore``), the decode loop (``branch_engine``), the window's ring
(``swa_ring``). Whatever moves the context reports it here, so that ``tokens`` always
names exactly what the context holds, and ``logits`` the logits after it when they are
kept: a route that fails halfway cuts back to what is exact (``cut``) or clears it
(``reset``), never leaving a claim the context does not back.

**Parked branches.** A branch left for another (the one before a switch, the version
paged away from) is kept whole in the model's own memory (``LlamaContext.keep_on_device``:
on a GPU, a copy within its memory), within a byte budget, in one of two places (the
context's two sequence ids each keep one copy). Going back to it puts that copy back,
moving nothing but its cell list through the host: the cells land in the emptied cache
as a from-scratch run lays them, the recurrent state with them, so it is exact. A sliding
window is not parked: llama.cpp puts a restored window in consecutive cells, and the
exact bits need the ring's own layout (``swa_ring``), which a window that wrapped the
ring does not have there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from sessions.branching.planner import common_prefix
from sessions.branching.swa_ring import SwaRing
from sessions.llama.sequences import LIVE, SPARE
from sessions.llama.state_blob import FLAGS_FULL
from sessions.memory_kind import MemoryKind

if TYPE_CHECKING:
    from sessions.checkpoints import CheckpointStore, StateCompat
    from sessions.llama.context import LlamaContext
    from sessions.llama.state_blob import SectionShape


@dataclass
class Parked:
    """A branch kept whole in the model's memory."""

    tokens: list[int]
    logits: np.ndarray | None
    kept: np.ndarray
    """What ``keep_on_device`` left on the host (the cell list); the data is in the model's memory."""
    nbytes: int
    """The state's bytes in the model's memory (what the budget counts)."""
    used: int
    """When it was parked or put back, in switches: the least recently used goes first."""


class LiveSequence:
    """The tokens the live sequence of ``ctx`` holds, the logits after them, its window ring,
    and the branches parked beside it."""

    def __init__(self, ctx: LlamaContext, kind: MemoryKind, n_swa: int, *, parking: int = 0) -> None:
        self.ctx = ctx
        self.kind = kind
        self.n_swa = n_swa
        self.parking = parking if kind is not MemoryKind.SWA else 0
        """Most bytes of the model's memory parked branches may take (0: none are parked)."""
        self.parked: dict[int, Parked] = {}
        """The parked branches, by the sequence id whose copy holds each."""
        self._clock = 0
        self.ring = SwaRing(ctx, n_swa) if kind is MemoryKind.SWA else None
        """The sliding-window ring (None for other memory kinds)."""
        self.cells_shape: SectionShape | None = None
        """The layout shared by the context's cells-only states, once learnt."""
        self._tokens: list[int] = []
        self._logits: np.ndarray | None = None

    @property
    def tokens(self) -> list[int]:
        """The tokens the live sequence holds exactly (read it, never change it)."""
        return self._tokens

    @property
    def logits(self) -> np.ndarray | None:
        """The logits after the last token, when kept."""
        return self._logits

    def __len__(self) -> int:
        return len(self._tokens)

    def pos_min(self) -> int:
        """The oldest position still held (-1 when empty): the window's, past cells a
        restore filled before it (``SwaRing.real_from``)."""
        if not self._tokens:
            return -1
        pos_min = self.ctx.pos_min()
        return max(pos_min, self.ring.real_from) if self.ring is not None else pos_min

    def reset(self) -> None:
        """Clear the context: the live sequence holds nothing."""
        self.ctx.clear()
        self._tokens = []
        self._logits = None
        if self.ring is not None:
            self.ring.real_from = 0

    def hold(self, tokens: Sequence[int], logits: np.ndarray | None = None) -> None:
        """The context now holds exactly ``tokens`` (a restore put them there)."""
        self._tokens = list(tokens)
        self._logits = logits

    def extend(self, tokens: Sequence[int], logits: np.ndarray | None = None) -> None:
        """``tokens`` were decoded after the live ones (``logits``: after the last of them)."""
        self._tokens += tokens  # not a new list: that copies the whole prefix per batch
        self._logits = logits

    def keep_logits(self, logits: np.ndarray | None) -> None:
        """The logits after the last live token, now known (a snapshot gave them)."""
        self._logits = logits

    def cut(self, keep: int) -> None:
        """The context was cut back to its first ``keep`` tokens."""
        self._tokens = self._tokens[:keep]  # a new list: plans made before keep theirs
        self._logits = None

    # -- parked branches ---------------------------------------------------------------

    def park(self, besides: int | None = None) -> None:
        """Keep the live branch whole in the model's memory before it is cut or cleared for
        another (in the place other than ``besides``, a copy about to be put back); a
        branch already parked as it is is left where it is."""
        if not self.parking or not self._tokens:
            return
        if any(p.tokens == self._tokens for p in self.parked.values()):
            return
        nbytes = self.ctx.state_size(LIVE, FLAGS_FULL)
        if nbytes > self.parking:
            return
        free = [seq for seq in (LIVE, SPARE) if seq != besides]
        # The same branch grown (a reply added) replaces its older copy; else the least used goes.
        same = [seq for seq in free if seq in self.parked and _extends(self._tokens, self.parked[seq].tokens)]
        seq = same[0] if same else min(free, key=lambda k: self.parked[k].used if k in self.parked else -1)
        self.parked.pop(seq, None)
        if sum(p.nbytes for p in self.parked.values()) + nbytes > self.parking:
            return
        if seq == LIVE:
            kept = self.ctx.keep_on_device(LIVE)
        else:
            self.ctx.seq_cp(LIVE, SPARE)
            try:
                kept = self.ctx.keep_on_device(SPARE)
            finally:
                self.ctx.seq_rm(SPARE)
        self._clock += 1
        self.parked[seq] = Parked(list(self._tokens), self._logits, kept, nbytes, self._clock)

    def parked_for(self, target: Sequence[int]) -> int | None:
        """Where the parked branch is that leads furthest into ``target`` (a prefix of it),
        when it leads further than the live sequence does (None: no such branch)."""
        if not self.parked:
            return None
        here = common_prefix(self._tokens, target)
        return max((seq for seq, p in self.parked.items() if len(p.tokens) > here and _extends(target, p.tokens)),
                   key=lambda seq: len(self.parked[seq].tokens), default=None)

    def unpark_for(self, target: Sequence[int]) -> bool:
        """Put back the parked branch ``parked_for`` names; the live branch is parked in its
        stead. True when one was put back."""
        best = self.parked_for(target)
        if best is None:
            return False
        chosen = self.parked[best]
        self.park(besides=best)
        self.ctx.clear()
        if not self.ctx.put_back_from_device(chosen.kept, LIVE):
            self.parked.pop(best, None)
            self.reset()
            return False
        self._clock += 1
        chosen.used = self._clock
        self.hold(chosen.tokens, chosen.logits)
        return True

    def forget_parked(self) -> None:
        """Drop every parked branch (the context is about to go)."""
        self.parked.clear()


def _extends(longer: Sequence[int], prefix: Sequence[int]) -> bool:
    return len(prefix) <= len(longer) and common_prefix(longer, prefix) == len(prefix)



class Engine(Protocol):
    """What the checkpoint helpers (``Captures`` reads checkpoints out, ``RouteRunner`` and
    ``RestoreReads`` put them back) see of the engine that owns them: its live sequence,
    its context and store, and where to tell a checkpoint's trouble. Named so that they
    do not import the engine."""

    seq: LiveSequence
    ctx: LlamaContext
    store: CheckpointStore | None
    compat: StateCompat
    kind: MemoryKind
    n_swa: int
    deferred_seconds: float

    def checkpoint_trouble(self, what: str, error: Exception) -> None:
        """A checkpoint could not be taken or used (``errors.CHECKPOINT_TROUBLE``): say so,
        once for each ``what``; it costs a recompute, never a reply."""
        ...
