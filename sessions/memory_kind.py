"""The four kinds of model memory llamachat has to checkpoint, and why they differ.

Restoring a conversation branch means putting the model's memory back exactly as it was
after the branch's last token. What that memory *is* decides what a checkpoint must hold
and whether the cache can simply be cut back to an earlier position, so the engine, the
model discovery and the test models all speak in terms of this one enum.
"""

from __future__ import annotations

from enum import StrEnum


class MemoryKind(StrEnum):
    """How a model remembers the tokens it has seen.

    - ``PLAIN``: a full KV cache, one cell per token. Cutting back to any earlier
      position is exact and free, so one state per branch point is enough and a shared
      prefix never has to be evaluated twice.
    - ``SWA``: interleaved sliding-window attention (Gemma 3 style): most layers keep only
      the last ``n_swa`` tokens. Once the window has slid past a position the cache cannot
      be cut back there; a checkpoint must carry the window as it stood at that position.
    - ``HYBRID``: attention layers plus recurrent layers (LFM2 short convolutions, Mamba
      blocks in Jamba-like models). The attention part can be cut back, the recurrent part
      cannot: it is a single running state that must be checkpointed per position.
    - ``RECURRENT``: only recurrent state (Mamba, RWKV). Memory is constant in the length of
      the conversation, and the only way back to an earlier position is a saved state (or
      a full recompute).
    """

    PLAIN = "plain"
    SWA = "swa"
    HYBRID = "hybrid"
    RECURRENT = "recurrent"

