"""What goes wrong when a checkpoint is taken or put back.

Checkpoints are a cache: none of these may cost a reply or a wrong token. The engine
catches them where a checkpoint is taken, read out or restored, says so once (the
checkpoint store's report), and decodes instead what the checkpoint would have given.
Anything else raised there is a bug, and goes on up.
"""

from __future__ import annotations

from sessions.checkpoints import StoreClosedError
from sessions.errors import LlamachatError
from sessions.llama.state_blob import LayoutError


class RestoreFailed(LlamachatError):
    """A checkpoint could not be put back (llama.cpp refused it, or it is gone); the live
    sequence must be rebuilt."""


CHECKPOINT_TROUBLE = (RestoreFailed, LayoutError, StoreClosedError)
"""The errors a checkpoint may meet that cost a recompute, never a reply."""
