"""Where the window or recurrent state is snapshotted, and why every snapshot stays on disk.

Attention cells can be cut back to any token, so a plain model's branch point costs
nothing to find again. A sliding window or a recurrent state cannot: it is given back
only by a snapshot taken at exactly that position, or by re-decoding from an earlier
one. Every gesture starts at a message boundary (an edit keeps what comes before the
user message, a regenerate what comes before the reply, a switch or a continuation
starts at a branch's tip), so a snapshot at every boundary, kept on disk, makes each of
them evaluate only its new tokens, in this process and after a restart. Inside a long
message the segments are cut at a spacing (``restart_spacing``), and each cut gets a
snapshot too, so that wherever a snapshot is missing (evicted under the disk budget, or
never taken by an older version) a restore re-decodes at most that spacing:

- a sliding window: one window (``n_swa`` tokens), the span a window snapshot stands for;
- recurrent and hybrid state: cuts every ``RECURRENT_SPACING`` tokens, and a state at
  those of them that this model's costs on this machine call for (``state_spacing``):
  a state stays at every message start, and inside a long message at a spacing where
  the states take no more disk per token than the tokens' attention cells, and reading
  one costs less than re-decoding a few of the tokens it stands for. A recurrent state
  of a large model is tens to hundreds of MB, so on a CPU (slow to re-decode) the disk
  decides, on a GPU (fast to re-decode) the time makes states sparser still.

The disk they take is held by the checkpoint store's budget, which evicts what is
cheapest to re-decode in the chats used least recently, not by a ratio here: a user who
comes back tomorrow to a chat re-processes nothing, however many windows it took.

Reading a snapshot stays off the path to the first token wherever it can: a window stays
in llama.cpp's ring for a while, and is read after the reply (``Captures.flush``) unless
the rest of the prompt would overwrite it first; only a recurrent state, which the next
token overwrites, is read as the decode passes it, and inside a message only where the
spacing calls for one.
"""

from __future__ import annotations

from dataclasses import dataclass

from sessions.memory_kind import MemoryKind

RECURRENT_SPACING = 256
"""Where long messages of a recurrent or hybrid model are cut, and the finest spacing of
their states: the grid the states a model's costs call for are placed on
(``state_spacing``), so that any spacing chosen, in any process, lands on boundaries
every process cuts at."""
MOST_STATE_SPACING = 16 * RECURRENT_SPACING
"""The widest spacing of states inside a long message, whatever they cost."""
READS_PER_REDECODE = 16
"""A state is worth keeping where re-decoding the span it stands for (its spacing) costs
at least this many reads of it: on average a restore re-decodes half that span, and the
states read on a prefill's path cost at most a sixteenth of its decoding."""


def restart_spacing(kind: MemoryKind, n_swa: int) -> int | None:
    """Most tokens between two snapshots along a branch (None: the kind needs none)."""
    if kind is MemoryKind.SWA:
        return max(1, n_swa)
    if kind in (MemoryKind.RECURRENT, MemoryKind.HYBRID):
        return RECURRENT_SPACING
    return None


def segment_interval(interval: int, kind: MemoryKind, n_swa: int) -> int:
    """Where long messages are cut: the configured interval, or the restart spacing if shorter."""
    spacing = restart_spacing(kind, n_swa)
    return interval if spacing is None else min(interval, spacing)


ASSUMED_COPY_BYTES_PER_SECOND = 5e9
"""Until a snapshot has been timed on this machine."""


@dataclass
class SnapshotPolicy:
    """Which boundaries get a snapshot, and how far apart recurrent states are.

    A snapshot that can wait until after the reply (a window still in the ring then) is
    always taken. A recurrent state, read as the decode passes it, is taken at a message's
    end (every gesture starts at one) and inside a long message where the spacing needs
    it (the next boundary would be more than ``state_spacing`` past the last snapshot):
    never more often, whatever the clock says, as the disk it takes is what limits how
    many chats keep theirs.
    """

    boundaries: bool = True
    """Snapshot segment boundaries. Off, only prompt ends and tips get one: tests use that
    to reach the routes that must do without. A sliding window's pieces are taken at every
    boundary all the same: the window at a prompt end or a tip is made of them."""
    copy_bytes_per_second: float = ASSUMED_COPY_BYTES_PER_SECOND
    """Measured speed of reading a snapshot out of the context (moving average)."""
    every_boundary: bool = False
    """A recurrent state at every boundary, whatever the spacing: tests that count what a
    route restores must not depend on how fast this machine decoded a tiny model."""

    def state_spacing(self, state_bytes: int, kv_bytes_per_token: float, seconds_per_token: float | None) -> int:
        """Tokens between recurrent states inside a long message, on the ``RECURRENT_SPACING``
        grid: the smallest spacing at which the states take no more disk per token than the
        attention cells of those tokens, and re-decoding the span a state stands for costs
        at least ``READS_PER_REDECODE`` reads of it at this machine's measured speeds."""
        by_disk = state_bytes / kv_bytes_per_token if kv_bytes_per_token > 0 else 0.0  # (a hybrid's cells)
        by_time = 0.0
        if seconds_per_token:
            by_time = READS_PER_REDECODE * self.snapshot_seconds(state_bytes) / seconds_per_token
        wanted = max(RECURRENT_SPACING, by_disk, by_time)
        grid = -(-int(wanted) // RECURRENT_SPACING) * RECURRENT_SPACING
        return min(MOST_STATE_SPACING, grid)

    def snapshot_seconds(self, nbytes: int) -> float:
        return nbytes / max(self.copy_bytes_per_second, 1.0)

    def timed(self, nbytes: int, seconds: float) -> None:
        """Learn the copy speed from one snapshot read."""
        if nbytes < 1 << 16 or seconds <= 0:
            return  # too small to say anything about bandwidth
        self.copy_bytes_per_second = 0.7 * self.copy_bytes_per_second + 0.3 * nbytes / seconds
