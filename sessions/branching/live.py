"""What the checkpoint helpers see of the engine: one live sequence and its context.

``Captures`` (reading checkpoints out) and ``RouteRunner`` (putting them back) work on the
engine's live sequence; they name it through this protocol so that they do not import
the engine that owns them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from sessions.branching.swa_ring import SwaRing
    from sessions.checkpoints import CheckpointStore, StateCompat
    from sessions.llama.context import LlamaContext
    from sessions.llama.state_blob import SectionShape
    from sessions.memory_kind import MemoryKind


class LiveSequence(Protocol):
    ctx: LlamaContext
    store: CheckpointStore | None
    compat: StateCompat
    kind: MemoryKind
    n_swa: int
    live: list[int]
    """The tokens the live sequence holds exactly."""
    live_logits: np.ndarray | None
    """The logits after the last live token, when kept."""
    deferred_seconds: float
    ring: SwaRing | None
    """The sliding-window ring of the live sequence (None for other memory kinds)."""
    cells_shape: SectionShape | None
    """The layout shared by the context's cells-only states, once a restore learned it."""

    def _reset(self) -> None:
        """Clear the context: the live sequence holds nothing."""
        ...

    def checkpoint_trouble(self, what: str, error: Exception) -> None:
        """A checkpoint could not be taken or used (``errors.CHECKPOINT_TROUBLE``): say so,
        once for each ``what``; it costs a recompute, never a reply."""
        ...
