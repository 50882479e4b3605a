"""When to snapshot the window or recurrent state, and which snapshots to keep on disk.

Attention cells are saved for every token range: they cost what the model itself keeps
and are read once, after the reply, off the path to the first token. A snapshot of the
sliding window or the recurrent state is another matter: it is large (a window is
``n_swa`` tokens of most layers), it must be read while the decode is at exactly that
boundary, and it only pays off if a later restore starts there. Its price depends on
the hardware: on a CPU a window costs a fraction of a millisecond against seconds of
decoding, on a GPU the same copy can cost as much as decoding a few hundred tokens.

So the rule is relative, and measured on this machine:

- *in RAM*: a boundary gets a snapshot when decoding the tokens since the previous one
  took at least ``1 / overhead`` times what the snapshot costs to read (2% by default),
  so snapshots add at most that share to a prefill; for a sliding window, only once a
  whole window has passed since the previous one, so that no two snapshots hold the same
  cell. A restore that finds no snapshot where it needs one re-decodes from the one
  before, so the rule trades a little reading on every prefill against re-decoding on
  some restores, at this machine's prices: a CPU, which decodes slowly, snapshots often;
  a GPU, which decodes fast, rarely;
- *on disk*: a snapshot stays for good when the attention cells saved since the previous
  one on disk weigh at least ``1 / disk_share`` times the snapshot, so snapshots add at
  most that share to the disk a branch uses; besides those, the latest prompt end (where a
  regenerate starts) and tip (where the next turn or a switch back starts) of each branch
  are on disk, replaced as the branch grows (``Captures``).
"""

from __future__ import annotations

from dataclasses import dataclass

ASSUMED_COPY_BYTES_PER_SECOND = 5e9
"""Until a snapshot has been timed on this machine."""


@dataclass
class SnapshotPolicy:
    overhead: float = 0.02
    """Snapshots cost at most this share of the decode time they can save."""
    disk_share: float = 0.5
    """Snapshots on disk weigh at most this share of the attention cells along a branch."""
    every_boundary: bool = False
    """Snapshot every boundary (tests that count restored tokens; comparisons)."""
    copy_bytes_per_second: float = ASSUMED_COPY_BYTES_PER_SECOND
    """Measured speed of reading a snapshot out of the context (moving average)."""

    def snapshot_seconds(self, nbytes: int) -> float:
        return nbytes / max(self.copy_bytes_per_second, 1.0)

    def due(self, decode_seconds_since: float, nbytes: int, *, tokens_since: int, min_tokens: int = 0) -> bool:
        """Is a snapshot of ``nbytes`` worth taking this long (and this many tokens) after the last?"""
        if self.every_boundary:
            return True
        if tokens_since < min_tokens:
            return False
        return decode_seconds_since * self.overhead >= self.snapshot_seconds(nbytes)

    def persist(self, cells_bytes_since: int, nbytes: int) -> bool:
        """Should a snapshot of ``nbytes`` stay on disk for good, ``cells_bytes_since`` after the last?"""
        return self.every_boundary or cells_bytes_since * self.disk_share >= nbytes

    def timed(self, nbytes: int, seconds: float) -> None:
        """Learn the copy speed from one snapshot read."""
        if nbytes < 1 << 16 or seconds <= 0:
            return  # too small to say anything about bandwidth
        speed = nbytes / seconds
        self.copy_bytes_per_second = 0.7 * self.copy_bytes_per_second + 0.3 * speed
