"""What the engine says, in types of its own: the words of its protocol (``protocol.ChatEngine``).

The branch engine (``sessions.branching``), the llama.cpp bindings (``sessions.llama``) and
the checkpoint store (``sessions.checkpoints``) each have types of their own; none of them
crosses the protocol. ``chat_engine`` turns theirs into these, so that the controller, and
the front ends above it, know only what is here. An engine in another process sends these
over its socket (``wire``), and the fake engine of the UI tests makes them directly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sessions.branching.branch_engine import CONTINUABLE as CONTINUABLE
from sessions.branching.planner import STEP_PRIOR as STEP_PRIOR
from sessions.llama.decode_speeds import BATCH_MIN as BATCH_MIN
from sessions.memory_kind import MemoryKind
from sessions.stop_reason import StopReason

if TYPE_CHECKING:
    import numpy as np

__all__ = ["BATCH_MIN", "CONTINUABLE", "STEP_PRIOR", "Generated", "LoadedModel", "Prepared", "ProgressFn", "Rates",
           "RoutePlan", "Tier", "WarmedAhead"]

Tier = Literal["ram", "disk"]
"""Where a checkpoint is kept: in the store's RAM, or only on disk."""

ProgressFn = Callable[[int, int, float], None]
"""A prompt's progress: (tokens done, tokens to do, tokens per second)."""


@dataclass(frozen=True)
class LoadedModel:
    """The model an engine holds, as its file describes it."""

    path: Path
    fingerprint: str
    """Names the model's weights and vocabulary: tokens and checkpoints are kept per fingerprint."""
    name: str
    architecture: str
    n_params: int
    n_vocab: int
    n_ctx_train: int
    n_swa: int
    """The sliding window's length (0: none)."""
    kind: MemoryKind
    chat_template: str | None
    """The template the file carries (None: none)."""
    bos_text: str
    eos_text: str
    add_bos: bool
    size_bytes: int


@dataclass(frozen=True)
class Rates:
    """The rates a plan is priced at, updated from the engine's own calls."""

    eval_per_token: float = 2e-3
    """Seconds per token decoded in a batch."""
    step_seconds: float = STEP_PRIOR * 2e-3
    """Seconds per token replayed alone (a generated reply, decoded as it was sampled)."""
    ram_seconds_per_byte: float = 1 / 4e9
    disk_seconds_per_byte: float = 1 / 1e9
    measured: bool = False
    """Whether the decode rates come from this engine's own calls (not the defaults)."""


@dataclass(frozen=True)
class RoutePlan:
    """What making a branch live takes: the live tokens kept, those restored from
    checkpoints, those decoded; and the seconds that should take."""

    keep: int
    """Live tokens kept; the live sequence is cut back to this (0 = cleared)."""
    evaluate_from: int
    """Tokens ``target[evaluate_from:]`` are decoded."""
    target_len: int
    tokens_restored: int = 0
    """Tokens whose state comes from checkpoints rather than the live sequence."""
    ram_bytes: int = 0
    """Checkpoint bytes restored from RAM."""
    disk_bytes: int = 0
    """Checkpoint bytes restored from disk."""
    estimate_seconds: float = 0.0
    rates: Rates = field(default_factory=Rates)
    """The rates ``estimate_seconds`` was priced at."""

    @property
    def tokens_kept(self) -> int:
        return self.keep

    @property
    def tokens_to_evaluate(self) -> int:
        return self.target_len - self.evaluate_from

    @property
    def bytes_restored(self) -> int:
        return self.ram_bytes + self.disk_bytes

    def restore_seconds(self, rates: Rates | None = None) -> float:
        """Seconds reading what this plan restores should take (at ``rates``, default its own)."""
        rates = rates or self.rates
        return self.ram_bytes * rates.ram_seconds_per_byte + self.disk_bytes * rates.disk_seconds_per_byte


@dataclass(frozen=True)
class Prepared:
    """A branch made live (``ChatEngine.prepare``): how, and what it cost."""

    logits: np.ndarray | None
    """After the last token; None only when they were not asked for (``need_logits``)."""
    plan: RoutePlan
    tokens_restored: int
    tokens_evaluated: int
    seconds: float
    bytes_restored: int = 0
    """Checkpoint bytes put back into the context."""
    tokens_unparked: int = 0
    """Of ``tokens_restored``, those put back from a branch parked in the model's memory
    (no bytes of it through the host)."""
    decode_seconds: float = 0.0
    """Of ``seconds``, the time inside ``llama_decode``; the rest is the engine's own work."""
    overhead_cpu_seconds: float = 0.0
    """CPU time the engine spent outside ``llama_decode``: its own work, as a figure that
    other programs competing for the CPU do not inflate."""
    state_seconds: float = 0.0
    """Of ``seconds``, the time inside llama.cpp's state reads and writes (restores, and
    snapshots read on the decode's path)."""

    @property
    def overhead_seconds(self) -> float:
        return max(0.0, self.seconds - self.decode_seconds)


@dataclass(frozen=True)
class Generated:
    """A reply sampled after the live sequence (``ChatEngine.generate``)."""

    tokens: list[int]
    text: str
    stop_reason: StopReason
    first_token_at: float | None
    """perf_counter() when the first token was sampled (None if none was)."""
    seconds: float


@dataclass(frozen=True)
class WarmedAhead:
    """What one warm-ahead did (``ChatEngine.warm_ahead``)."""

    nbytes: int = 0
    """Payload bytes read from disk into RAM."""
    segments: int = 0
    """Checkpoints read from disk into RAM."""
    in_ram: int = 0
    """Checkpoints of the route found in RAM already."""
    left: int = 0
    """Checkpoints of the route left where they were (stopped, or no room in RAM)."""
    stopped: bool = False
    """The caller's ``should_stop`` ended it before the route was done."""
