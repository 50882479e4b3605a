"""Why a reply ended, as stored with it and shown beside it.

A ``StrEnum``: members compare equal to the plain strings the engine returns and that
older databases and exported files hold, so values cross every boundary unchanged.
"""

from __future__ import annotations

from enum import StrEnum


class StopReason(StrEnum):
    EOG = "eog"
    """The model ended its turn."""
    LENGTH = "length"
    """The reply reached its length limit (``max_tokens``)."""
    CONTEXT_FULL = "context_full"
    """The context window filled up before the reply ended."""
    CANCELLED = "cancelled"
    """The user stopped it; the text written so far is kept."""
    UNKNOWN = ""
    """Not recorded: a reply imported from another program."""

    @classmethod
    def parse(cls, value: object) -> StopReason:
        """The member for a stored value; anything unrecognised reads as ``UNKNOWN``."""
        try:
            return cls(str(value))
        except ValueError:
            return cls.UNKNOWN
