"""Checkpoints of llama.cpp sequence state, per branch segment, in RAM and on disk.

``CheckpointStore`` is the whole API the engine needs: ``put`` a ``Segment`` after each
message boundary, ``get`` it back (verified) when a branch is rebuilt. Pure Python: the
blobs are opaque here, so nothing in this package imports llama.cpp.
May import only the core's small modules (``durable``, ``paths``); never llama, branching or the engine.
"""

from .errors import CheckpointError, InvalidSegmentError, StoreClosedError
from .file_reads import Place, Placed, StateSpan
from .keys import Kind, PrefixHasher, StateCompat, prefix_hash
from .listing import CheckpointFile, Removed, list_files, remove_files
from .segment import Segment, SegmentMeta, Tier
from .store import CheckpointStore, StoreStats

__all__ = [
    "CheckpointError",
    "CheckpointFile",
    "CheckpointStore",
    "InvalidSegmentError",
    "Kind",
    "Place",
    "Placed",
    "PrefixHasher",
    "Removed",
    "Segment",
    "SegmentMeta",
    "StateCompat",
    "StateSpan",
    "StoreClosedError",
    "StoreStats",
    "Tier",
    "list_files",
    "prefix_hash",
    "remove_files",
]
