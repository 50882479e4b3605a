"""What the session controller refuses, in plain words.

Separate from the controller so that the app and the command line can catch these
without importing the engine machinery.
"""

from __future__ import annotations


class ControllerError(Exception):
    """An operation that cannot be done now; the message says why in plain words."""


class ContextOverflow(ControllerError):
    """The branch no longer fits in the context window (``trim_to_fit`` offers a way on)."""

    def __init__(self, message: str, *, tokens: int | None = None, n_ctx: int | None = None):
        super().__init__(message)
        self.tokens = tokens
        """How long the branch is, in tokens of the loaded model (when known)."""
        self.n_ctx = n_ctx

    @classmethod
    def of_branch(cls, tokens: int, n_ctx: int) -> ContextOverflow:
        return cls(f"this branch is {tokens:,} tokens long and the context holds {n_ctx:,}",
                   tokens=tokens, n_ctx=n_ctx)


class GenerationCancelled(ControllerError):
    """The user stopped the prompt before any reply was produced."""
