"""Where a branch's token sequence is cut into segments.

A segment ends at every message end and every ``interval`` tokens inside a long message
(counted from the message's start). The cut points depend only on the messages'
frozen tokens, so the same prefix always yields the same segments, whichever branch or
process made them: that is what lets siblings share checkpoints and a reopened session
find the ones saved before.
"""

from __future__ import annotations

from collections.abc import Sequence


def message_ends(lengths: Sequence[int]) -> list[int]:
    """Cumulative end positions of consecutive messages with the given token counts."""
    ends, total = [], 0
    for n in lengths:
        total += n
        ends.append(total)
    return ends


def segment_boundaries(ends: Sequence[int], interval: int) -> list[int]:
    """Every segment end for messages ending at ``ends`` (sorted, without duplicates)."""
    if interval <= 0:
        raise ValueError("checkpoint interval must be positive")
    bounds: list[int] = []
    start = 0
    for end in ends:
        if end <= start:
            continue  # an empty message adds no tokens and no boundary
        p = start + interval
        while p < end:
            bounds.append(p)
            p += interval
        bounds.append(end)
        start = end
    return bounds


def batches(start: int, end: int, n_batch: int, *, stepped: bool = False) -> list[tuple[int, int]]:
    """The decode batches for tokens [start, end).

    llama.cpp on the CPU computes a token bit-identically in any batch of two or more
    tokens, but differently when it is decoded alone (another kernel runs). So prompt
    batches never leave a single token at the end of a range, and a reply that was
    generated one token at a time (``stepped``) is replayed one token at a time: every
    route to a state then does the same arithmetic and lands on the same bits.
    """
    if stepped:
        return [(a, a + 1) for a in range(start, end)]
    if n_batch < 2:
        raise ValueError("n_batch must be at least 2")
    out = [(a, min(a + n_batch, end)) for a in range(start, end, n_batch)]
    if len(out) > 1 and out[-1][1] - out[-1][0] == 1:
        (a, _), (_, last) = out[-2], out[-1]
        out[-2:] = [(a, last - 2), (last - 2, last)]
    return out
