"""Where llama.cpp keeps a sliding window's cells: the ring's size and which cell holds what.

Pure arithmetic on positions, apart from ``sessions.branching.swa_ring`` (which moves the
cells in and out of llama.cpp): a run that decodes from position 0 puts position ``p`` in
cell ``p mod N`` of a ring of ``N`` cells. A window is at most a lap of the ring
(``n_swa <= N``, or the context is shorter than both), so it wraps at most once, and its
order in the ring is one or two ranges of positions: reckoned here rather than sorted,
because a new process's first restore paid for numpy's first argsort and diff.
"""

from __future__ import annotations

import numpy as np

CACHE_PAD = 256
"""llama.cpp rounds the context, and the sliding-window cache, up to a multiple of this."""


def padded(cells: int) -> int:
    """``cells`` rounded up as llama.cpp sizes a cache."""
    return -(-cells // CACHE_PAD) * CACHE_PAD


def ring_size(n_ctx: int, n_swa: int, n_seq_max: int, n_ubatch: int) -> int:
    """Cells of llama.cpp's sliding-window cache for a unified cache (``swa_full`` off)."""
    return padded(min(n_ctx, n_swa * n_seq_max + n_ubatch))


def ring_bytes(window_bytes: int, size: int, n_swa: int) -> int:
    """At least the bytes of a ring state, from those of a window state of ``n_swa`` cells.

    Both have the same fixed part and the same bytes per cell; the ring has ``size`` cells.
    """
    return window_bytes + -(-max(0, size - n_swa) * window_bytes // max(n_swa, 1))


def ring_positions(pos_max: int, size: int) -> np.ndarray:
    """The position each cell holds after an uninterrupted run up to ``pos_max``."""
    if pos_max < size:  # the first lap: cell i holds position i
        return np.arange(pos_max + 1, dtype=np.int32)
    newest = pos_max % size  # cells 0..newest hold this lap, the others the lap before
    return np.concatenate((np.arange(pos_max - newest, pos_max + 1, dtype=np.int32),
                           np.arange(pos_max - size + 1, pos_max - newest, dtype=np.int32)))


def ring_ranges(a: int, b: int, size: int) -> list[tuple[int, int]]:
    """Positions ``[a, b)`` (at most a lap of the ring) as ranges in ring order, as a run
    saves them: once they wrap, the positions from the first one in cell 0 on, then the
    older ones."""
    wrap = (a // size + 1) * size  # the first position of the range to land in cell 0
    return [(a, b)] if wrap >= b else [(wrap, b), (a, wrap)]


def window_ranges(pos_max: int, n_swa: int, size: int) -> list[tuple[int, int]]:
    """The window after ``pos_max`` as ranges of positions ``[a, b)`` in ring order."""
    return ring_ranges(max(0, pos_max - n_swa + 1), pos_max + 1, size)


def ring_order(a: int, b: int, size: int) -> np.ndarray:
    """The positions ``[a, b)`` in ring order (as a run saves them)."""
    return np.concatenate([np.arange(lo, hi, dtype=np.int32) for lo, hi in ring_ranges(a, b, size)])


def window_positions(pos_max: int, n_swa: int, size: int) -> np.ndarray:
    """The positions of the window after ``pos_max``, in ring order (as a run saves them)."""
    return ring_order(max(0, pos_max - n_swa + 1), pos_max + 1, size)


def ring_runs(a: int, b: int, size: int) -> list[tuple[int, int, int]]:
    """``cell_runs`` of the positions ``[a, b)`` in ring order, reckoned from their ranges."""
    runs: list[tuple[int, int, int]] = []
    for lo, hi in ring_ranges(a, b, size):
        at = runs[-1][1] if runs else 0
        if runs and lo % size == runs[-1][2] + at:  # the older part follows in the next cells: a whole lap
            runs[-1] = (0, at + hi - lo, runs[-1][2])
        else:
            runs.append((at, at + hi - lo, lo % size))
    return runs


def window_runs(pos_max: int, n_swa: int, size: int) -> list[tuple[int, int, int]]:
    """``cell_runs`` of the window after ``pos_max``, reckoned from its ranges."""
    return ring_runs(max(0, pos_max - n_swa + 1), pos_max + 1, size)


def piece_range(start: int, end: int, n_swa: int) -> tuple[int, int]:
    """The positions of the segment ``[start, end)`` whose sliding-layer cells are kept:
    those inside the window at its end. A token's sliding-layer cells are needed only by
    the windows of the boundaries less than ``n_swa`` tokens after it, and the first
    boundary after a token ends its own segment: so each is kept once, with its segment."""
    return max(start, end - n_swa, 0), end


def cell_runs(slots: np.ndarray) -> list[tuple[int, int, int]]:
    """``(lo, hi, slot)`` for each run of consecutive ring cells: cells ``lo..hi`` of a
    window go to ring cells ``slot..slot + hi - lo`` (one run, or two once it wraps)."""
    breaks = (np.flatnonzero(np.diff(slots) != 1) + 1).tolist()
    return [(lo, hi, int(slots[lo])) for lo, hi in zip([0, *breaks], [*breaks, len(slots)], strict=True)]
