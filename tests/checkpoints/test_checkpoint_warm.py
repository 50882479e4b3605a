"""Warming ahead stays inside the RAM budget and never pushes out the branch shown."""

from __future__ import annotations

from sessions.branching.warm_ahead import WarmPart, warm_parts
from sessions.checkpoints import CheckpointStore

from .test_checkpoint_store import COMPAT, chain

SIZE = 2048


def on_disk(tmp_path, cuts):
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24) as first:
        segments = chain(cuts, size=SIZE)
        for segment in segments:
            first.put(segment)
        first.flush()
    return segments


def parts(segments) -> list[WarmPart]:
    return [WarmPart(s.prefix, "cells", s.nbytes, "disk") for s in segments]


def test_a_warm_reads_what_fits_beside_the_branch_shown(tmp_path):
    segments = on_disk(tmp_path, [0, 10, 20, 30, 40, 50, 60])
    shown, other = segments[:2], segments[2:]
    budget = 4 * segments[0].nbytes + segments[0].nbytes // 2
    with CheckpointStore(tmp_path, ram_bytes=budget, disk_bytes=1 << 24) as store:
        for segment in shown:
            assert store.get(COMPAT, segment.prefix) is not None
        store.set_active(COMPAT, [s.prefix for s in shown])

        warmed = warm_parts(store, COMPAT, parts(other), lambda: False)

        assert (warmed.segments, warmed.left, warmed.stopped) == (2, 2, False)
        assert [store.where(COMPAT, s.prefix) for s in segments] == ["ram"] * 4 + ["disk"] * 2
        assert store.stats().ram_evictions == 0


def test_a_warm_skips_what_is_in_ram_and_marks_it_used(tmp_path):
    segments = on_disk(tmp_path, [0, 10, 20, 30])
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24) as store:
        assert store.get(COMPAT, segments[0].prefix) is not None
        route = [WarmPart(segments[0].prefix, "cells", segments[0].nbytes, "ram"), *parts(segments[1:])]
        warmed = warm_parts(store, COMPAT, route, lambda: False)
        assert (warmed.segments, warmed.in_ram, warmed.nbytes) == (2, 1, sum(s.nbytes for s in segments[1:]))
        assert store.stats().hits_disk == 1  # the warm's own reads are no restore
