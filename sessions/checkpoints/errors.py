"""Errors of the checkpoint store.

Checkpoints are a cache: a bad file is never fatal, it is deleted and its tokens are
recomputed. So only two things raise out of the store: a caller handing it a malformed
segment (a bug worth a clear message), and use after ``close``. ``CorruptCheckpointError``
stays inside the package; it carries the plain-words reason that ends up in the report.
"""

from __future__ import annotations

from sessions.errors import LlamachatError


class CheckpointError(LlamachatError):
    """Base class of every error raised by ``sessions.checkpoints``."""


class InvalidSegmentError(CheckpointError, ValueError):
    """A segment handed to the store does not describe a valid token range."""


class StoreClosedError(CheckpointError, RuntimeError):
    """The store was closed and can no longer take segments."""

    def __init__(self) -> None:
        super().__init__("the checkpoint store is closed; no more segments can be saved")


class CorruptCheckpointError(CheckpointError):
    """A checkpoint file failed a check; ``reason`` says which one, in plain words."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
