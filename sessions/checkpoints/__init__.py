"""Checkpoints of llama.cpp sequence state, per branch segment, in RAM and on disk.

``CheckpointStore`` is the whole API the engine needs: ``put`` a ``Segment`` after each
message boundary, ``get`` it back (verified) when a branch is rebuilt. Pure Python: the
blobs are opaque here, so nothing in this package imports llama.cpp.
"""

from .errors import CheckpointError, InvalidSegmentError, StoreClosedError
from .file_reads import Place, Placed, StateSpan
from .keys import Kind, PrefixHasher, StateCompat, prefix_hash
from .segment import Segment, SegmentMeta
from .store import CheckpointStore, StoreStats

__all__ = [
    "CheckpointError",
    "CheckpointStore",
    "InvalidSegmentError",
    "Kind",
    "Place",
    "Placed",
    "PrefixHasher",
    "Segment",
    "SegmentMeta",
    "StateCompat",
    "StateSpan",
    "StoreClosedError",
    "StoreStats",
    "prefix_hash",
]
