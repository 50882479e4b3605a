"""The two tiers: RAM LRU by bytes, disk budget eviction by branch shape and use."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from sessions.checkpoints import CheckpointStore, Segment, StateCompat, prefix_hash
from sessions.checkpoints.disk_index import DiskEntry, DiskIndex
from sessions.checkpoints.file_format import HEADER_SIZE
from sessions.checkpoints.keys import Key, address
from sessions.checkpoints.ram_tier import RamTier
from sessions.checkpoints.use_clock import UseClock

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


def test_disk_index_evicts_inactive_files_then_active_ones_cheapest_first() -> None:
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
    # Each file carries the sitting of the newest file built on it, so a chain leaves
    # from its tip: d, then c; among the active, e's chain was used before d's.
    assert order == ["d", "c", "e", "b", "a"]
    assert index.total_bytes == 0 and len(index) == 0


HOUR = 3600.0


def test_the_chat_used_longest_ago_goes_first_snapshots_then_leaves_then_inner_cells() -> None:
    """Two chats, hours apart; each wrote cells along a branch and snapshots at two of its
    message ends. The older chat goes whole before the newer one loses a file, and within
    it what costs least to re-decode goes first, whatever the order of its uses."""
    index = DiskIndex()

    def chat(name: str, base: float) -> dict[str, Key]:
        keys: dict[str, Key] = {}
        parent = None
        for n in range(3):  # cells 0 -> 1 -> 2, then snapshots at the ends of 0 and 2
            key: Key = (COMPAT.digest(), f"{name}{n}".ljust(32, "0"), "cells")
            index.add(key, DiskEntry(Path(f"{name}{n}"), parent, 10, base + n, 10 * n, 10 * n + 10, False))
            keys[f"cells{n}"], parent = key, key[1]
        for n in (0, 2):
            snap: Key = (COMPAT.digest(), keys[f"cells{n}"][1], "snapshot")
            index.add(snap, DiskEntry(Path(f"{name}{n}s"), None, 10, base + 0.5 - n, 10 * n + 10, 10 * n + 10,
                                      True))
            keys[f"snap{n}"] = snap
        return keys

    old, new = chat("old", 0.0), chat("new", 5 * HOUR)
    names = {key: f"{chat_name}.{what}" for chat_name, keys in (("old", old), ("new", new))
             for what, key in keys.items()}
    index = found_again(index)
    # Snapshots by the re-decoding their loss costs (snap0 stands for 10 tokens, snap2 for
    # the 20 after snap0), not by their last use; then the cells, leaves first.
    assert [names[k] for k, _e in found_again(index).pop_victims(0, lambda key: False)] == [
        "old.snap0", "old.snap2", "old.cells2", "old.cells1", "old.cells0",  # not LRU: snap2, cells0, snap0...
        "new.snap0", "new.snap2", "new.cells2", "new.cells1", "new.cells0",
    ]
    index.touch(old["cells2"], (8 * HOUR, 8 * HOUR))  # the old branch restored this evening...
    assert [names[k] for k, _e in index.pop_victims(0, lambda key: False)] == [
        "old.snap0", "old.snap2",  # ...without its snapshots
        "new.snap0", "new.snap2", "new.cells2", "new.cells1", "new.cells0",
        "old.cells2", "old.cells1", "old.cells0",  # the cells it builds on were used with it
    ]


def found_again(index: DiskIndex) -> DiskIndex:
    """The index a new process builds from the same files: found in another order, each
    with its time of last use (its mtime) and the sitting that time falls in."""
    found = [(key, DiskEntry(e.path, e.parent, e.size, e.last_use, e.start, e.end, e.has_logits))
             for key, e in reversed(index.items())]
    UseClock().seed(e for _key, e in found)
    again = DiskIndex()
    again.add_all(found)
    return again


def test_eviction_scales_to_a_hundred_thousand_files() -> None:
    """Filling a budget of 100,000 files and writing 20,000 more, each write evicting
    one file, costs a few heap operations per file, so this takes seconds (a pass over
    every file per eviction would take hours). The oldest chain is the branch in use."""
    index = DiskIndex()
    digest = COMPAT.digest()
    chains, budget = 1000, 100_000 * 10
    started = time.perf_counter()
    tips: list[str | None] = [None] * chains
    in_use: set[Key] = set()
    for n in range(120_000):
        chain = n % chains
        key: Key = (digest, f"{n:032x}", "snapshot" if n % 3 == 0 else "cells")
        parent = tips[chain] if key[2] == "cells" else None
        index.add(key, DiskEntry(Path(str(n)), parent, 10, float(n), 0, 1, False, sitting=float(n // 5000)))
        if key[2] == "cells":
            tips[chain] = key[1]
        if chain == 0:
            in_use.add(key)
        if n % 50 == 0:  # a file written earlier is read again (if it is still there)
            earlier = n // 2
            index.touch((digest, f"{earlier:032x}", "snapshot" if earlier % 3 == 0 else "cells"),
                        (float(n // 5000), float(n)))
        index.pop_victims(budget, in_use.__contains__)
    assert len(index) == 100_000 and index.total_bytes == budget
    assert in_use <= set(index)
    victims = index.pop_victims(budget // 2, lambda key: False)
    assert len(victims) == 50_000
    elapsed = time.perf_counter() - started
    assert elapsed < 60, elapsed


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
        store.put(b5)  # everything left is active: the tip goes, one range to re-decode
        assert store.flush(timeout=30)
        assert files_of(tmp_path, root, b1, b2, b3, b4, b5) == [True] * 5 + [False]
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
