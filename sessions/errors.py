"""The project's one error root, what the session controller refuses, and how the engine
stops or refuses, in plain words.

Separate from the controller and the engine so that the front ends can catch these
without importing the engine machinery. Every exception class of the project derives
from ``LlamachatError`` (``tests/layout/test_error_root.py`` walks every module to hold it to
that), so the app and the command line catch the root, not a list of families.
"""

from __future__ import annotations


class LlamachatError(Exception):
    """Something llamachat could not do; ``str()`` of it is one sentence for the user.

    Its subclasses keep their other bases (``ValueError``, ``OSError``, ``KeyError``)
    where code catches those.
    """



class ControllerError(LlamachatError):
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


class TurnTaken(ControllerError):
    """Another llamachat is writing a reply in this chat; nothing was changed."""

    def __init__(self, session_id: int) -> None:
        super().__init__(f"another llamachat window or command is writing a reply in this chat (session "
                         f"{session_id}): nothing was saved; send again when it has finished")
        self.session_id = session_id


class ReplyNotSaved(ControllerError):
    """A reply was written (and shown as it came) but could not be stored; the words say
    what was lost and what is kept."""


class DecodeCancelled(LlamachatError):
    """The engine's work was stopped (``ChatEngine.request_abort``, a job's stop); the live
    sequence no longer matches any token list."""


class BatchUnavailable(LlamachatError):
    """No context for several versions at once could be made (memory, most often)."""
