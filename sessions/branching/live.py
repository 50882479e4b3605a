"""The live sequence of one context: what it holds exactly, and the only place that changes it.

A branch is made live by cutting, restoring and decoding, in several modules: the route's
restores (``restore``), the decode loop (``branch_engine``), the window's ring
(``swa_ring``). Whatever moves the context reports it here, so that ``tokens`` always
names exactly what the context holds, and ``logits`` the logits after it when they are
kept: a route that fails halfway cuts back to what is exact (``cut``) or clears it
(``reset``), never leaving a claim the context does not back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from sessions.branching.swa_ring import SwaRing
from sessions.memory_kind import MemoryKind

if TYPE_CHECKING:
    from sessions.checkpoints import CheckpointStore, StateCompat
    from sessions.llama.context import LlamaContext
    from sessions.llama.state_blob import SectionShape


class LiveSequence:
    """The tokens the live sequence of ``ctx`` holds, the logits after them, its window ring."""

    def __init__(self, ctx: LlamaContext, kind: MemoryKind, n_swa: int) -> None:
        self.ctx = ctx
        self.kind = kind
        self.n_swa = n_swa
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
