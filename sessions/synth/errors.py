"""The one error the model maker raises for bad requests."""

from __future__ import annotations

from sessions.errors import LlamachatError


class SynthError(LlamachatError, ValueError):
    """A model that cannot be made (unknown architecture or size, bad window...).

    The message is a plain sentence meant to be shown to the user as is.
    """
