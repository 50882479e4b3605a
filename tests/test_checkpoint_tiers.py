"""The two tiers: RAM LRU by bytes, disk budget eviction by branch shape and use."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sessions.checkpoints import CheckpointStore, Segment, StateCompat, prefix_hash
from sessions.checkpoints.disk_index import DiskEntry, DiskIndex
from sessions.checkpoints.file_format import HEADER_SIZE
from sessions.checkpoints.keys import address
from sessions.checkpoints.ram_tier import RamTier

COMPAT = StateCompat("sha256:" + "12" * 32, "type_k=q8_0;type_v=q8_0;flash_attn=1")
SHARED = list(range(10))
BRANCH_A = SHARED + list(range(100, 200))
BRANCH_B = SHARED + list(range(500, 600))
STATE = 1000
FILE = HEADER_SIZE + STATE


def seg(tokens: list[int], start: int, end: int, size: int = STATE) -> Segment:
    return Segment(
        COMPAT,
        prefix_hash(tokens[:end]),
        prefix_hash(tokens[:start]) if start else None,
        start,
        end,
        bytes([end % 256]) * size,
        None,
    )


# ----- RAM ------------------------------------------------------------------------------


def test_ram_tier_evicts_least_recently_used_by_bytes() -> None:
    tier = RamTier(3 * STATE, lambda key: False)
    first, second, third, fourth = (seg(BRANCH_A, 0, n) for n in (1, 2, 3, 4))
    for s in (first, second, third):
        assert tier.put(s)
    assert tier.get(first.key) is first  # now the most recent
    tier.put(fourth)
    assert second.key not in tier
    assert [k for k in tier.keys()] == [third.key, first.key, fourth.key]
    assert tier.nbytes == 3 * STATE and tier.evictions == 1


def test_ram_tier_counts_bytes_not_items() -> None:
    tier = RamTier(2500, lambda key: False)
    small = [seg(BRANCH_A, 0, n, size=500) for n in (1, 2, 3)]
    for s in small:
        tier.put(s)
    big = seg(BRANCH_A, 0, 4, size=2000)
    tier.put(big)
    assert tier.keys() == [small[2].key, big.key]
    assert tier.nbytes == 2500


def test_ram_tier_refuses_a_segment_larger_than_its_budget() -> None:
    tier = RamTier(999, lambda key: False)
    assert not tier.put(seg(BRANCH_A, 0, 5))
    assert len(tier) == 0 and tier.nbytes == 0


def test_ram_tier_evicts_protected_segments_last() -> None:
    first, second, third, fourth = (seg(BRANCH_A, 0, n) for n in (1, 2, 3, 4))
    protected = {first.key, second.key, fourth.key}
    tier = RamTier(2 * STATE, lambda key: key in protected)
    for s in (first, second, third):
        tier.put(s)
    assert tier.keys() == [first.key, second.key]  # the newest, unprotected, went
    tier.put(fourth)
    assert tier.keys() == [second.key, fourth.key]  # all protected: the oldest went
    assert tier.evictions == 2


# ----- disk index -----------------------------------------------------------------------


def entry(name: str, parent: str | None, size: int, last_use: float) -> DiskEntry:
    return DiskEntry(Path(name), parent, size, last_use, 0 if parent is None else 1, 2, False)


def test_disk_index_evicts_inactive_leaves_then_inactive_then_active() -> None:
    index = DiskIndex()
    c = "c" * 32
    names = {}

    def add(name: str, parent: str | None, last_use: float) -> None:
        names[name] = (c, name.ljust(32, "0"), "cells")
        parent_prefix = names[parent][1] if parent else None
        index.add(names[name], entry(name, parent_prefix, 10, last_use))

    add("a", None, 1.0)          # active root, oldest of all
    add("b", "a", 2.0)           # active
    add("c", "a", 3.0)           # inactive, parent of d
    add("d", "c", 9.0)           # inactive leaf, the newest
    add("e", "b", 4.0)           # active leaf
    active = {names[n] for n in "abe"}
    order = [k[1][0] for k, _ in index.pop_victims(0, active.__contains__)]
    assert order == ["d", "c", "a", "b", "e"]
    assert index.total_bytes == 0 and len(index) == 0


def test_disk_index_tracks_children_through_removals() -> None:
    index = DiskIndex()
    root, child = ("c", "1" * 32, "cells"), ("c", "2" * 32, "cells")
    index.add(root, entry("r", None, 5, 1.0))
    index.add(child, entry("x", root[1], 5, 2.0))
    assert not index.is_leaf(root) and index.is_leaf(child)
    index.remove(child)
    assert index.is_leaf(root) and index.total_bytes == 5


# ----- disk tier through the store -------------------------------------------------------


@pytest.fixture
def problems() -> list[str]:
    return []


def files_of(folder: Path, *segments: Segment) -> list[bool]:
    return [(folder / address(s.compat, s.prefix)).exists() for s in segments]


def test_disk_budget_evicts_abandoned_leaves_first_and_active_last(tmp_path, problems) -> None:
    root = seg(BRANCH_A, 0, 10)
    a1, a2 = seg(BRANCH_A, 10, 20), seg(BRANCH_A, 20, 30)
    b1, b2, b3, b4, b5 = (seg(BRANCH_B, 10 * i, 10 * i + 10) for i in range(1, 6))
    assert root == seg(BRANCH_B, 0, 10)  # the shared prefix is one segment
    with CheckpointStore(tmp_path, ram_bytes=10 * FILE, disk_bytes=5 * FILE,
                         on_problem=problems.append) as store:
        store.set_active(COMPAT, [s.prefix for s in (root, b1, b2)])
        for s in (root, a1, a2, b1, b2):
            store.put(s)
        assert store.flush(timeout=30)
        store.get(COMPAT, a1.prefix)  # the abandoned branch was used most recently...
        store.get(COMPAT, a2.prefix)
        for new, lost in ((b3, a2), (b4, a1)):
            store.set_active(COMPAT, [s.prefix for s in (root, b1, b2, b3, b4)])
            store.put(new)
            assert store.flush(timeout=30)
            assert files_of(tmp_path, lost) == [False]  # ...but its leaf goes first
        assert files_of(tmp_path, root, b1, b2, b3, b4) == [True] * 5
        store.set_active(COMPAT, [s.prefix for s in (root, b1, b2, b3, b4, b5)])
        store.put(b5)  # everything left is active: the least recently used goes
        assert store.flush(timeout=30)
        assert files_of(tmp_path, root, b1, b2, b3, b4, b5) == [False] + [True] * 5
        stats = store.stats()
        assert (stats.evictions, stats.disk_count, stats.disk_bytes) == (3, 5, 5 * FILE)
        assert store.where(COMPAT, a2.prefix) == "ram"  # evicted from disk, not from RAM
    assert problems == []


def test_index_rebuilt_after_restart_keeps_the_tree_shape(tmp_path, problems) -> None:
    root, a1, a2 = seg(BRANCH_A, 0, 10), seg(BRANCH_A, 10, 20), seg(BRANCH_A, 20, 30)
    b1, b2 = seg(BRANCH_B, 10, 20), seg(BRANCH_B, 20, 30)
    with CheckpointStore(tmp_path, ram_bytes=0, disk_bytes=10 * FILE) as store:
        for s in (root, a1, a2, b1, b2):
            store.put(s)
    now = time.time()
    for s, age in ((root, 100), (a1, 90), (b1, 80), (a2, 10), (b2, 5)):
        os.utime(tmp_path / address(COMPAT, s.prefix), (now - age, now - age))
    with CheckpointStore(tmp_path, ram_bytes=0, disk_bytes=3 * FILE,
                         on_problem=problems.append) as store:
        assert store.where(COMPAT, root.prefix) == "disk"
        # Pure LRU would drop the root first; leaves go first, the oldest leaf first.
        assert files_of(tmp_path, root, a1, a2, b1, b2) == [True, False, False, True, True]
        assert store.stats().evictions == 2
    assert problems == []


def test_a_full_disk_makes_room_from_abandoned_checkpoints_then_writes(small_disk, problems) -> None:
    """The disk fills before the budget does: the oldest of our own files go, the write goes on."""
    small_disk.need_mount()
    cuts = [0, *range(10, 130, 10)]
    tokens = list(range(1000))
    segments = [seg(tokens, a, b, 300_000) for a, b in zip(cuts, cuts[1:], strict=False)]  # 12 x 300 KB, 2 MiB disk
    folder = small_disk.folder / "ck"
    with CheckpointStore(folder, ram_bytes=1 << 30, disk_bytes=1 << 30, on_problem=problems.append) as store:
        for segment in segments:
            store.put(segment)
            assert store.flush(30)
        assert files_of(folder, segments[-1]) == [True]  # the newest always made it
        assert not all(files_of(folder, *segments))  # older ones made room
        assert store.stats().write_errors == 0
    full = [p for p in problems if "disk is full" in p]
    assert len(full) == 1 and "deleted to make room" in full[0]


def test_a_read_from_disk_counts_as_a_use_after_a_restart(tmp_path, problems) -> None:
    """Reading a file stamps its time, so the next process evicts the unread leaf first."""
    root, a1, b1 = seg(BRANCH_A, 0, 10), seg(BRANCH_A, 10, 20), seg(BRANCH_B, 10, 20)
    with CheckpointStore(tmp_path, ram_bytes=0, disk_bytes=10 * FILE) as store:
        for s in (root, a1, b1):
            store.put(s)
    now = time.time()
    for s, age in ((root, 300), (a1, 200), (b1, 100)):  # a1 the older leaf...
        os.utime(tmp_path / address(COMPAT, s.prefix), (now - age, now - age))
    with CheckpointStore(tmp_path, ram_bytes=0, disk_bytes=10 * FILE) as store:
        got = store.read_into(COMPAT, a1.prefix, "cells", lambda header, read_at: [memoryview(bytearray(STATE))])
        assert got is not None and (got.start, got.end) == (10, 20)  # ...until it is read
    assert (tmp_path / address(COMPAT, a1.prefix)).stat().st_mtime > now - 100
    with CheckpointStore(tmp_path, ram_bytes=0, disk_bytes=2 * FILE, on_problem=problems.append) as store:
        assert store.where(COMPAT, root.prefix) == "disk"  # the index is built, over budget
        assert store.stats().evictions == 1
        assert files_of(tmp_path, root, a1, b1) == [True, True, False]
    assert problems == []


def test_a_disk_full_of_other_files_is_reported_once_and_writing_resumes(small_disk, problems) -> None:
    small_disk.need_mount()
    folder = small_disk.folder / "ck"
    filler = small_disk.fill()
    first, second, third = (seg(BRANCH_A, a, b, 100_000) for a, b in ((0, 10), (10, 20), (20, 30)))
    with CheckpointStore(folder, ram_bytes=1 << 30, disk_bytes=1 << 30, on_problem=problems.append) as store:
        store.put(first)
        store.put(second)
        assert store.flush(30)
        assert store.stats().write_errors == 2 and len(problems) == 1
        assert "no checkpoint of ours was left to delete" in problems[0]
        filler.unlink()  # space again
        store.put(third)
        assert store.flush(30)
        assert files_of(folder, third) == [True] and len(problems) == 1
