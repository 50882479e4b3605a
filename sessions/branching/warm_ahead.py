"""Read a branch's checkpoints from disk into RAM before anyone asks to go there.

While the user looks at a message in the tree, the checkpoints a switch there would
restore are read into the store's RAM tier, so that the switch then costs a copy from
RAM rather than a read and a checksum. Nothing here touches the live context: the plan
only reads the live state, and the reads go to the checkpoint store alone.

The route warmed is the one the switch takes once everything is in RAM (disk priced as
RAM), so that warming it makes it the cheapest. Its parts are read root first: the
rewind snapshot, the cells, then the snapshot at their end, in the order a restore
takes them; a stop leaves a warmed prefix that still shortens the restore.

The RAM tier's budget bounds it: the parts are read only while the whole route fits
beside the checkpoints of the branches the user is on (``CheckpointStore.ram_room``), so
warming never pushes those out. What it does push out is the store's LRU choice: the
checkpoints used least recently, never one of this route (each part read or found is
marked as just used).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sessions.branching.planner import Plan, SnapshotInfo
from sessions.checkpoints import CheckpointStore, Kind, StateCompat, Tier


@dataclass(frozen=True)
class WarmPart:
    """One checkpoint of a route: its prefix hash, kind, size and where it is kept."""

    prefix: str
    kind: Kind
    nbytes: int
    tier: Tier


@dataclass(frozen=True)
class WarmedAhead:
    """What one warm-ahead did."""

    nbytes: int = 0
    """Payload bytes read from disk into RAM."""
    segments: int = 0
    """Checkpoints read from disk into RAM."""
    in_ram: int = 0
    """Checkpoints of the route found in RAM already."""
    left: int = 0
    """Checkpoints of the route left where they were (stopped, or no room in RAM)."""
    stopped: bool = False
    """``should_stop`` ended it before the route was done."""


def route_parts(plan: Plan, prefixes: dict[int, str]) -> list[WarmPart]:
    """The checkpoints ``plan`` restores, in the order its restore reads them (a sliding
    window's pieces each, sized as a share of the window's bytes)."""
    parts = []
    if plan.rewind is not None:
        parts += _snapshot_parts(plan.rewind, prefixes)
    parts += [WarmPart(prefixes[info.end], "cells", info.nbytes, info.tier) for info in plan.restore]
    if plan.snapshot is not None:
        parts += _snapshot_parts(plan.snapshot, prefixes)
    return parts


def _snapshot_parts(snapshot: SnapshotInfo, prefixes: dict[int, str]) -> list[WarmPart]:
    ends = [end for _start, end in snapshot.parts] or [snapshot.end]
    share = snapshot.nbytes // len(ends)
    return [WarmPart(prefixes[end], "snapshot", share, snapshot.tier) for end in ends]


def warm_parts(
    store: CheckpointStore | None, compat: StateCompat, parts: list[WarmPart], should_stop: Callable[[], bool],
) -> WarmedAhead:
    """Read ``parts`` into RAM in order, while they fit and until ``should_stop``."""
    if store is None:
        return WarmedAhead(left=len(parts))
    room = store.ram_room(compat, [(part.prefix, part.kind) for part in parts])
    nbytes = segments = in_ram = total = 0
    for index, part in enumerate(parts):
        if should_stop():
            return WarmedAhead(nbytes, segments, in_ram, len(parts) - index, stopped=True)
        total += part.nbytes
        if total > room:
            return WarmedAhead(nbytes, segments, in_ram, len(parts) - index)
        read = store.warm(compat, part.prefix, part.kind)  # in RAM already: marked as just used
        if read:
            nbytes, segments = nbytes + read, segments + 1
        elif part.tier == "ram":
            in_ram += 1
    return WarmedAhead(nbytes, segments, in_ram)
