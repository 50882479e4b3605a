"""How fast ``llama_decode`` runs on this machine, for batches and for single tokens.

A branch is rebuilt in two kinds of calls: a typed or pasted message goes in batches,
a generated reply is replayed one token per call (as it was sampled, which keeps the
rebuild bit-identical). The two differ by several times per token, by a factor that
depends on the model and the device (a call's fixed cost weighs most on a small model
and on a GPU), so each is measured from the calls of its own kind instead of one being
derived from the other. Priced with a rate taken from one-token calls as if they were a
batch, a switch was estimated ten times too slow.

Each rate is the mean of the middle half of the latest calls of its kind: it follows a
context that grows slower as it fills, and a few calls held up by another program (or
the first call of a context, which sets up its graph) do not move it.
"""

from __future__ import annotations

from collections import deque

BATCH_MIN = 16
"""Fewest tokens in a call for it to measure the batched rate (fewer: the call's fixed
cost would be counted as per-token cost)."""
SAMPLES = 64
"""Latest calls of each kind a rate is taken from."""


class DecodeSpeeds:
    """Seconds per token in a batch and seconds per one-token call, as measured here."""

    def __init__(self) -> None:
        self._batched: deque[float] = deque(maxlen=SAMPLES)
        self._step: deque[float] = deque(maxlen=SAMPLES)

    def record(self, n_tokens: int, seconds: float) -> None:
        """Learn from one ``llama_decode`` of ``n_tokens`` that took ``seconds``."""
        if n_tokens == 1:
            self._step.append(seconds)
        elif n_tokens >= BATCH_MIN:
            self._batched.append(seconds / n_tokens)

    @property
    def batched(self) -> float | None:
        """Seconds per token of calls of at least ``BATCH_MIN`` tokens (None: none seen)."""
        return _middle_mean(self._batched)

    @property
    def step(self) -> float | None:
        """Seconds per call of one token (None: none seen)."""
        return _middle_mean(self._step)


def _middle_mean(samples: deque[float]) -> float | None:
    if not samples:
        return None
    ordered = sorted(samples)
    quarter = len(ordered) // 4
    middle = ordered[quarter:len(ordered) - quarter]
    return sum(middle) / len(middle)
