"""One saved piece of a branch: the attention cells of a token range, or the state at a point.

A branch is rebuilt by restoring the cells of its ranges root-first, so a ``cells``
segment names its parent by the hash of the tokens before ``start``; two branches that
share a prefix share those segments. What a model keeps besides attention cells (the
sliding window, the recurrent state) is a ``snapshot`` at one point of a branch, taken
only where a restore is likely to start, since it is large and stands for the whole
branch before it. Either may carry the logits after its last token.

Payloads are kept as whatever buffer they were read into (a numpy array from llama.cpp
or from a file), so storing one never copies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from .errors import InvalidSegmentError
from .keys import KINDS, Key, Kind, StateCompat, is_prefix_hash, key_of

LOGIT_BYTES = 4
"""Logits are stored as raw float32."""

Tier = Literal["ram", "disk"]
"""Where a checkpoint is: in memory (or on its way to disk), or only on disk."""
Role = Literal["", "prompt", "tip"]
"""Why a snapshot is on disk: "" kept for good; "prompt" or "tip" for a branch's latest
prompt end or tip, which the next turn on that branch replaces (the engine's captures)."""
ROLES: tuple[Role, ...] = ("", "prompt", "tip")

Payload = bytes | bytearray | memoryview | np.ndarray


@dataclass(frozen=True)
class SegmentMeta:
    """What the store knows about a checkpoint without reading its payload.

    The engine plans a route from these (which boundaries can be restored, from which
    tier, whether the logits come with it) before deciding what to restore.
    """

    prefix: str
    parent: str | None
    start: int
    end: int
    has_logits: bool
    tier: Tier
    """Where ``get`` would find it now: "ram" (or the write queue) or "disk"."""
    kind: Kind = "cells"
    nbytes: int = 0
    """Payload bytes (what restoring it reads)."""
    has_state: bool = True
    """False for a snapshot of a plain model: only the logits."""
    role: Role = ""


@dataclass(frozen=True, eq=False)
class Segment:
    """The opaque state of one token range (or point), plus the logits after it.

    Two segments are equal when they describe the same checkpoint with the same bytes,
    whatever buffer type holds them.
    """

    compat: StateCompat
    """Model and context params the state was taken with."""
    prefix: str
    """``prefix_hash(tokens[:end])``: the address of this segment."""
    parent: str | None
    """``prefix_hash(tokens[:start])``, or None when it starts at token 0 (or is a snapshot)."""
    start: int
    """First token position covered (a snapshot covers none: ``start == end``)."""
    end: int
    """One past the last token position covered."""
    state: Payload
    """Bytes from ``llama_state_seq_get_data_ext``: the attention cells of [start, end)
    for ``cells``; the window or recurrent state at ``end`` (whole state of a recurrent
    model, nothing for a plain one) for ``snapshot``."""
    logits: Payload | None = None
    """float32 logits after token ``end - 1`` (raw bytes), or None when not kept."""
    kind: Kind = "cells"
    role: Role = ""
    """For a snapshot on disk: kept for good, or the latest prompt end or tip of a branch."""

    def __post_init__(self) -> None:
        if not isinstance(self.compat, StateCompat):
            raise InvalidSegmentError("a segment needs a StateCompat")
        if self.kind not in KINDS:
            raise InvalidSegmentError(f"unknown checkpoint kind {self.kind!r}")
        if self.role not in ROLES or (self.role and self.kind != "snapshot"):
            raise InvalidSegmentError(f"a {self.kind} checkpoint cannot have the role {self.role!r}")
        if not is_prefix_hash(self.prefix):
            raise InvalidSegmentError(f"segment prefix {self.prefix!r} is not a prefix hash")
        if type(self.start) is not int or type(self.end) is not int:
            raise InvalidSegmentError("segment start and end must be integers")
        if self.kind == "snapshot":
            if not 0 < self.start == self.end or self.parent is not None:
                raise InvalidSegmentError(
                    f"a snapshot is a point after token 0 with no parent (start {self.start}, end {self.end})"
                )
        else:
            self._check_range()
        object.__setattr__(self, "state", _as_buffer(self.state, "state"))
        if self.logits is not None:
            logits = _as_buffer(self.logits, "logits")
            if len(logits) % LOGIT_BYTES:
                raise InvalidSegmentError(f"logits are {len(logits)} bytes, not a whole number of float32")
            object.__setattr__(self, "logits", logits)

    def _check_range(self) -> None:
        if not 0 <= self.start < self.end:
            raise InvalidSegmentError(f"segment range [{self.start}, {self.end}) is empty or negative")
        if (self.parent is None) != (self.start == 0):
            raise InvalidSegmentError(
                "a segment has a parent exactly when it does not start at token 0 "
                f"(start {self.start}, parent {self.parent!r})"
            )
        if self.parent is not None and not is_prefix_hash(self.parent):
            raise InvalidSegmentError(f"segment parent {self.parent!r} is not a prefix hash")
        if self.parent == self.prefix:
            raise InvalidSegmentError("a segment cannot be its own parent")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Segment):
            return NotImplemented
        return (
            (self.compat, self.prefix, self.parent, self.start, self.end, self.kind)
            == (other.compat, other.prefix, other.parent, other.start, other.end, other.kind)
            and _same_bytes(self.state, other.state)
            and _same_bytes(self.logits, other.logits)
        )

    __hash__ = None  # type: ignore[assignment]

    @property
    def nbytes(self) -> int:
        """Payload size: what the segment costs in RAM (and, plus a header, on disk)."""
        return len(self.state) + (len(self.logits) if self.logits is not None else 0)

    @property
    def key(self) -> Key:
        return key_of(self.compat, self.prefix, self.kind)

    @property
    def n_tokens(self) -> int:
        return self.end - self.start

    def meta(self, tier: Tier) -> SegmentMeta:
        return SegmentMeta(
            self.prefix, self.parent, self.start, self.end, self.logits is not None, tier,
            self.kind, self.nbytes, len(self.state) > 0, self.role,
        )


def _as_buffer(value: object, what: str) -> bytes | np.ndarray:
    """A flat byte buffer of ``value``, without copying what is already one."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, np.ndarray):
        if not value.flags.c_contiguous:
            value = np.ascontiguousarray(value)
        return value.reshape(-1).view(np.uint8)
    if isinstance(value, (bytearray, memoryview)):
        return np.frombuffer(value, dtype=np.uint8)
    raise InvalidSegmentError(f"segment {what} must be bytes, not {type(value).__name__}")


def _same_bytes(a: Payload | None, b: Payload | None) -> bool:
    if a is None or b is None:
        return a is b
    return as_view(a) == as_view(b)


def as_view(payload: Payload) -> memoryview:
    """A flat byte view of a payload, without copying it."""
    if isinstance(payload, np.ndarray):
        return payload.reshape(-1).view(np.uint8).data
    return memoryview(payload).cast("B")
