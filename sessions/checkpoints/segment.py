"""One saved piece of a branch: the llama.cpp state of tokens [start, end).

A branch is rebuilt by restoring its segments root-first, so a segment names its parent
by the hash of the tokens before ``start``. Two branches that share a prefix share the
segments of that prefix: the store keeps one copy whatever branch made it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import InvalidSegmentError
from .keys import Key, StateCompat, is_prefix_hash, key_of

LOGIT_BYTES = 4
"""Logits are stored as raw float32."""

Tier = Literal["ram", "disk"]


@dataclass(frozen=True)
class SegmentMeta:
    """What the store knows about a segment without reading its payload.

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


@dataclass(frozen=True)
class Segment:
    """The opaque state of one token range, plus the logits after its last token."""

    compat: StateCompat
    """Model and context params the state was taken with."""
    prefix: str
    """``prefix_hash(tokens[:end])``: the address of this segment."""
    parent: str | None
    """``prefix_hash(tokens[:start])``, or None when the segment starts at token 0."""
    start: int
    """First token position covered."""
    end: int
    """One past the last token position covered."""
    state: bytes
    """Bytes from ``llama_state_seq_get_data_ext`` (KV cells of [start, end) and the
    SWA window / recurrent rows as they stand at ``end``)."""
    logits: bytes | None = None
    """float32 logits after token ``end - 1`` (raw bytes), or None when not kept."""

    def __post_init__(self) -> None:
        if not isinstance(self.compat, StateCompat):
            raise InvalidSegmentError("a segment needs a StateCompat")
        if not is_prefix_hash(self.prefix):
            raise InvalidSegmentError(f"segment prefix {self.prefix!r} is not a prefix hash")
        if type(self.start) is not int or type(self.end) is not int:
            raise InvalidSegmentError("segment start and end must be integers")
        if not 0 <= self.start < self.end:
            raise InvalidSegmentError(
                f"segment range [{self.start}, {self.end}) is empty or negative"
            )
        if (self.parent is None) != (self.start == 0):
            raise InvalidSegmentError(
                "a segment has a parent exactly when it does not start at token 0 "
                f"(start {self.start}, parent {self.parent!r})"
            )
        if self.parent is not None and not is_prefix_hash(self.parent):
            raise InvalidSegmentError(f"segment parent {self.parent!r} is not a prefix hash")
        if self.parent == self.prefix:
            raise InvalidSegmentError("a segment cannot be its own parent")
        object.__setattr__(self, "state", _as_bytes(self.state, "state"))
        if self.logits is not None:
            logits = _as_bytes(self.logits, "logits")
            if len(logits) % LOGIT_BYTES:
                raise InvalidSegmentError(
                    f"logits are {len(logits)} bytes, not a whole number of float32"
                )
            object.__setattr__(self, "logits", logits)

    @property
    def nbytes(self) -> int:
        """Payload size: what the segment costs in RAM (and, plus a header, on disk)."""
        return len(self.state) + (len(self.logits) if self.logits is not None else 0)

    @property
    def key(self) -> Key:
        return key_of(self.compat, self.prefix)

    @property
    def n_tokens(self) -> int:
        return self.end - self.start

    def meta(self, tier: Tier) -> SegmentMeta:
        return SegmentMeta(
            self.prefix, self.parent, self.start, self.end, self.logits is not None, tier
        )


def _as_bytes(value: object, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise InvalidSegmentError(f"segment {what} must be bytes, not {type(value).__name__}")
