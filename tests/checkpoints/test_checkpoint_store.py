"""The store as the engine uses it: round trips, restarts, a slow disk, threads."""

from __future__ import annotations

import threading
from itertools import pairwise

import pytest

from sessions import paths
from sessions.checkpoints import CheckpointStore, Segment, StateCompat, StoreClosedError, prefix_hash
from sessions.checkpoints.disk_tier import DiskTier
from sessions.checkpoints.keys import address

COMPAT = StateCompat("sha256:" + "77" * 32, "type_k=f16;type_v=f16;n_seq_max=2;kv_unified=1")
TOKENS = list(range(7, 2007))
WAIT = 30.0


def chain(cuts: list[int], *, size: int = 2048, tokens: list[int] = TOKENS) -> list[Segment]:
    """Segments of ``tokens`` cut at ``cuts`` (each with float32 logits)."""
    out = []
    for start, end in pairwise(cuts):
        out.append(Segment(
            COMPAT,
            prefix_hash(tokens[:end]),
            prefix_hash(tokens[:start]) if start else None,
            start,
            end,
            bytes((end + i) % 256 for i in range(size)),
            bytes(range(16)),
        ))
    return out


@pytest.fixture
def problems() -> list[str]:
    return []


@pytest.fixture
def store(tmp_path, problems):
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24,
                         on_problem=problems.append) as opened:
        yield opened


class SlowDisk:
    """Holds every disk write (or, with ``method="remove"``, every deletion, before it
    touches the index) until ``release`` is set."""

    def __init__(self, monkeypatch, method: str = "save") -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        original = getattr(DiskTier, method)

        def held(tier, *args):
            self.entered.set()
            assert self.release.wait(WAIT), "the test never released the disk"
            original(tier, *args)

        monkeypatch.setattr(DiskTier, method, held)

    def __enter__(self) -> SlowDisk:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release.set()  # even when an assertion failed, so the store can close


def test_round_trip_in_ram(store) -> None:
    (seg,) = chain([0, 50])
    store.put(seg)
    assert store.where(COMPAT, seg.prefix) == "ram" and store.has(COMPAT, seg.prefix)
    assert store.get(COMPAT, seg.prefix) is seg
    assert store.stats().hits_ram == 1


def test_a_restarted_store_finds_what_the_first_one_wrote(tmp_path, problems) -> None:
    segments = chain([0, 100, 250, 400])
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24) as first:
        for seg in segments:
            first.put(seg)
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24,
                         on_problem=problems.append) as second:
        assert [second.where(COMPAT, s.prefix) for s in segments] == ["disk"] * 3
        assert [second.get(COMPAT, s.prefix) for s in segments] == segments
        assert [second.where(COMPAT, s.prefix) for s in segments] == ["ram"] * 3  # promoted
        stats = second.stats()
        assert (stats.hits_disk, stats.disk_count, stats.writes) == (3, 3, 0)
        assert second.get(COMPAT, prefix_hash(TOKENS[:99])) is None
        assert second.stats().misses == 1
    assert problems == []


def test_peek_describes_a_segment_without_reading_or_promoting_it(tmp_path) -> None:
    first, second = chain([0, 100, 250])
    bare = Segment(COMPAT, prefix_hash(TOKENS[:300]), second.prefix, 250, 300, b"s" * 64, None)
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24) as store:
        for seg in (first, second, bare):
            store.put(seg)
        meta = store.peek(COMPAT, second.prefix)
        assert (meta.start, meta.end, meta.parent, meta.has_logits, meta.tier) == (
            100, 250, first.prefix, True, "ram")
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24) as store:
        metas = [store.peek(COMPAT, s.prefix) for s in (first, second, bare)]
        assert [(m.start, m.end, m.has_logits, m.tier) for m in metas] == [
            (0, 100, True, "disk"), (100, 250, True, "disk"), (250, 300, False, "disk")]
        assert metas[0].parent is None and metas[2].parent == second.prefix
        assert store.peek(COMPAT, prefix_hash(TOKENS[:5])) is None
        stats = store.stats()
        assert (stats.ram_count, stats.hits_disk, stats.misses) == (0, 0, 0)


def test_default_folder_is_the_checkpoints_dir(problems) -> None:
    (seg,) = chain([0, 10])
    with CheckpointStore(ram_bytes=1 << 20, disk_bytes=1 << 24, on_problem=problems.append) as store:
        store.put(seg)
    assert (paths.checkpoints_dir() / address(COMPAT, seg.prefix)).is_file()


def test_segment_evicted_from_ram_is_read_back_from_disk(tmp_path, problems) -> None:
    segments = chain([0, 10, 20, 30], size=4000)
    with CheckpointStore(tmp_path, ram_bytes=8000, disk_bytes=1 << 24,
                         on_problem=problems.append) as store:
        for seg in segments:
            store.put(seg)
        assert store.flush(WAIT)
        assert store.where(COMPAT, segments[0].prefix) == "disk"
        assert store.get(COMPAT, segments[0].prefix) == segments[0]
        assert store.stats().hits_disk == 1 and store.stats().ram_evictions >= 1


def test_same_prefix_from_two_branches_is_one_file(store, tmp_path) -> None:
    (seg,) = chain([0, 30])
    twin = Segment(COMPAT, seg.prefix, None, 0, 30, seg.state, seg.logits)
    store.put(seg)
    assert store.flush(WAIT)
    store.put(twin)
    assert store.flush(WAIT)
    assert len(list(tmp_path.glob("*/*.ckpt"))) == 1
    assert store.stats().writes == 1


def test_restarted_store_does_not_rewrite_what_is_on_disk(tmp_path) -> None:
    (seg,) = chain([0, 30])
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24) as store:
        store.put(seg)
    path = tmp_path / address(COMPAT, seg.prefix)
    before = path.stat()
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24) as store:
        assert store.has(COMPAT, seg.prefix)
        store.put(seg)
        assert store.flush(WAIT)
        assert store.stats().writes == 0
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_put_never_waits_for_a_slow_disk(tmp_path, problems, monkeypatch) -> None:
    disk = SlowDisk(monkeypatch)
    segments = chain(list(range(0, 110, 10)))
    with CheckpointStore(tmp_path, ram_bytes=0, disk_bytes=1 << 24,
                         on_problem=problems.append) as store, disk:
        putter = threading.Thread(target=lambda: [store.put(s) for s in segments])
        putter.start()
        putter.join(WAIT)
        assert not putter.is_alive(), "put() blocked on the disk"
        assert not disk.release.is_set()
        stats = store.stats()
        assert (stats.pending_writes, stats.writes) == (10, 0)
        assert list(tmp_path.glob("*/*.ckpt")) == []
        # RAM keeps nothing (budget 0), yet a queued segment is still served.
        assert store.get(COMPAT, segments[5].prefix) is segments[5]
        assert store.where(COMPAT, segments[5].prefix) == "ram"
        disk.release.set()
        assert store.flush(WAIT)
        assert store.stats().writes == 10 and store.stats().pending_writes == 0
        assert store.get(COMPAT, segments[5].prefix) == segments[5]
        assert store.stats().hits_disk == 1
    assert problems == []


def test_full_queue_drops_the_oldest_pending_write(tmp_path, monkeypatch) -> None:
    disk = SlowDisk(monkeypatch)
    segments = chain(list(range(0, 80, 10)))
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24, queue_items=3) as store, disk:
        store.put(segments[0])
        assert disk.entered.wait(WAIT)  # the writer holds segment 0
        for seg in segments[1:]:
            store.put(seg)
        assert store.stats().dropped_writes == 3
        disk.release.set()
        assert store.flush(WAIT)
        on_disk = [(tmp_path / address(COMPAT, s.prefix)).exists() for s in segments]
        assert on_disk == [True] * 7  # the three dropped are written once the queue has drained


def test_a_burst_larger_than_the_ram_tier_reaches_the_disk_whole(tmp_path, monkeypatch) -> None:
    """Seven states come while the disk holds the first: the queue keeps three, so three
    are dropped from it, and RAM holds three. The dropped ones exist in RAM alone, so RAM
    lets the queued ones go instead (they are on their way to the disk), and every state
    is written once the queue has drained."""
    disk = SlowDisk(monkeypatch)
    segments = chain(list(range(0, 80, 10)))
    ram = 3 * segments[1].nbytes
    with CheckpointStore(tmp_path, ram_bytes=ram, disk_bytes=1 << 24, queue_items=3) as store, disk:
        store.put(segments[0])
        assert disk.entered.wait(WAIT)  # the writer holds segment 0
        for seg in segments[1:]:
            store.put(seg)
        assert store.stats().dropped_writes == 3
        assert [store.where(COMPAT, s.prefix) for s in segments[1:4]] == ["ram"] * 3
        disk.release.set()
        assert store.flush(WAIT)
        on_disk = [(tmp_path / address(COMPAT, s.prefix)).exists() for s in segments]
        assert on_disk == [True] * 7


def test_active_branch_stays_in_ram_while_others_rotate(tmp_path) -> None:
    active = chain([0, 10, 20], size=1000)
    others = chain([0, 10, 20, 30], size=1000, tokens=list(range(5000, 5100)))
    with CheckpointStore(tmp_path, ram_bytes=3100, disk_bytes=1 << 24) as store:
        store.set_active(COMPAT, [s.prefix for s in active])
        for seg in active + others:
            store.put(seg)
        assert store.flush(WAIT)
        assert [store.where(COMPAT, s.prefix) for s in active] == ["ram", "ram"]
        assert [store.where(COMPAT, s.prefix) for s in others] == ["disk", "disk", "ram"]
        store.set_active(COMPAT, [])
        store.put(chain([0, 40], size=1000, tokens=list(range(9000, 9100)))[0])
        assert store.where(COMPAT, active[0].prefix) == "disk"


def test_segment_larger_than_the_disk_budget_stays_in_ram(tmp_path, problems) -> None:
    big, small = chain([0, 10], size=5000)[0], chain([0, 20], size=100)[0]
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=4000,
                         on_problem=problems.append) as store:
        store.put(big)
        store.put(chain([0, 11], size=6000)[0])
        store.put(small)
        assert store.flush(WAIT)
        assert store.where(COMPAT, big.prefix) == "ram"
        assert store.stats().disk_count == 1
    assert problems == ["a checkpoint of 5.2 KB is larger than the disk budget of 4.0 KB (checkpoints.max_disk); "
                        "checkpoints that large stay in memory only"]


def test_a_failing_problem_handler_does_not_stop_the_writer(tmp_path) -> None:
    (seg,) = chain([0, 10])
    path = tmp_path / address(COMPAT, seg.prefix)
    path.parent.mkdir(mode=0o700)
    path.write_bytes(b"garbage" * 40)

    def explode(message: str) -> None:
        raise RuntimeError(message)

    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24, on_problem=explode) as store:
        assert store.flush(WAIT)
        assert store.stats().corrupt_deleted == 1
        store.put(seg)
        assert store.flush(WAIT)
        assert store.stats().writes == 1


def test_closed_store_refuses_new_segments_and_close_is_idempotent(tmp_path) -> None:
    store = CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24)
    (seg,) = chain([0, 10])
    store.put(seg)
    store.close()
    assert (tmp_path / address(COMPAT, seg.prefix)).is_file()  # close flushed it
    store.close()
    with pytest.raises(StoreClosedError, match="closed"):
        store.put(seg)
    assert store.get(COMPAT, seg.prefix) == seg


def test_concurrent_puts_and_gets_lose_nothing(tmp_path, problems) -> None:
    segments = chain(list(range(0, 2000, 20)), size=3000)
    with CheckpointStore(tmp_path, ram_bytes=60_000, disk_bytes=1 << 24, queue_items=len(segments),
                         on_problem=problems.append) as store:
        errors: list[BaseException] = []

        def reader() -> None:
            try:
                for seg in segments:
                    got = store.get(COMPAT, seg.prefix)
                    assert got is None or got == seg
            except BaseException as error:  # reported to the main thread below
                errors.append(error)

        readers = [threading.Thread(target=reader) for _ in range(2)]
        for thread in readers:
            thread.start()
        for seg in segments:
            store.put(seg)
        for thread in readers:
            thread.join(WAIT)
        assert errors == [] and not any(t.is_alive() for t in readers)
        assert store.flush(WAIT)
        assert all(store.get(COMPAT, s.prefix) == s for s in segments)
        assert store.stats().disk_count == len(segments)
    assert problems == []


def test_a_read_that_missed_a_file_written_meanwhile_leaves_it_listed(tmp_path, monkeypatch) -> None:
    """A read opens the path just before the writer renames the file into place and lists
    it: the read finds nothing, and must not take the new file off the index (a file the
    index forgot is never restored, nor counted against the budget)."""
    from sessions.checkpoints import disk_tier

    (seg,) = chain([0, 50])
    with CheckpointStore(tmp_path, ram_bytes=0, disk_bytes=1 << 24) as store:
        real_open = disk_tier.open_regular

        def open_as_the_writer_finishes(path, *args, **kwargs):
            try:
                return real_open(path, *args, **kwargs)
            except FileNotFoundError:
                store.put(seg)  # written and listed between this open and the read's handling
                assert store.flush(WAIT)
                raise

        monkeypatch.setattr(disk_tier, "open_regular", open_as_the_writer_finishes)
        assert store.get(COMPAT, seg.prefix) is None  # that read found no file
        monkeypatch.undo()
        assert store.stats().disk_count == 1 and store.where(COMPAT, seg.prefix) == "disk"
        assert store.get(COMPAT, seg.prefix) == seg


def snapshot(end: int, *, state: bytes = b"w" * 512, logits: bytes | None = bytes(8)) -> Segment:
    return Segment(COMPAT, prefix_hash(TOKENS[:end]), None, end, end, state, logits, kind="snapshot")


def test_snapshots_and_cells_of_one_prefix_are_two_checkpoints(store, tmp_path) -> None:
    (cells,) = chain([0, 30])
    snap = snapshot(30)
    store.put(cells)
    store.put(snap)
    assert store.flush(WAIT)
    assert (tmp_path / address(COMPAT, cells.prefix)).is_file()
    assert (tmp_path / address(COMPAT, snap.prefix, "snapshot")).is_file()
    meta = store.peek(COMPAT, snap.prefix, "snapshot")
    assert (meta.kind, meta.start, meta.end, meta.has_logits, meta.has_state) == ("snapshot", 30, 30, True, True)
    assert store.get(COMPAT, snap.prefix, "snapshot") == snap
    assert store.get(COMPAT, snap.prefix) == cells


def test_a_snapshot_kept_in_ram_only_never_reaches_the_disk(store, tmp_path) -> None:
    snap = snapshot(40)
    store.put(snap, persist=False)
    assert store.flush(WAIT)
    assert store.where(COMPAT, snap.prefix, "snapshot") == "ram"
    assert not store.persisted(COMPAT, snap.prefix, "snapshot")
    assert not list(tmp_path.glob("*/*.snap"))


def test_dropping_from_disk_deletes_the_file_and_keeps_the_ram_copy(store, tmp_path) -> None:
    snap = snapshot(50)
    store.put(snap)
    assert store.flush(WAIT)
    path = tmp_path / address(COMPAT, snap.prefix, "snapshot")
    assert path.is_file() and store.persisted(COMPAT, snap.prefix, "snapshot")
    store.drop_from_disk(COMPAT, snap.prefix, "snapshot")
    assert store.flush(WAIT)
    assert not path.exists() and not store.persisted(COMPAT, snap.prefix, "snapshot")
    assert store.get(COMPAT, snap.prefix, "snapshot") == snap


def test_a_drop_queued_behind_its_write_leaves_no_file(tmp_path, monkeypatch) -> None:
    disk = SlowDisk(monkeypatch)
    with disk, CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24) as store:
        first, second = snapshot(60), snapshot(70)
        store.put(first)
        assert disk.entered.wait(WAIT)  # the first write is in flight
        store.put(second)
        store.drop_from_disk(COMPAT, second.prefix, "snapshot")  # still queued: never written
        store.drop_from_disk(COMPAT, first.prefix, "snapshot")  # deleted once written
        disk.release.set()
        assert store.flush(WAIT)
        assert not list(tmp_path.glob("*/*.snap"))


def test_a_checkpoint_just_over_the_budget_is_told_in_bytes(tmp_path, problems) -> None:
    """Sizes that round alike used to read "a checkpoint of 0.0 MB does not fit the disk
    budget of 0.0 MB"."""
    (seg,) = chain([0, 10], size=2000)
    with CheckpointStore(tmp_path / "roomy", ram_bytes=1 << 20, disk_bytes=1 << 20) as store:
        store.put(seg)
        assert store.flush(WAIT)
    (written,) = [p for p in (tmp_path / "roomy").rglob("*.ckpt")]
    size = written.stat().st_size
    with CheckpointStore(tmp_path / "tight", ram_bytes=1 << 20, disk_bytes=size - 1,
                         on_problem=problems.append) as store:
        store.put(seg)
        assert store.flush(WAIT)
    assert problems == [f"a checkpoint of {size:,} bytes is larger than the disk budget of {size - 1:,} bytes "
                        "(checkpoints.max_disk); checkpoints that large stay in memory only"]


def test_sizes_that_round_alike_are_told_in_bytes() -> None:
    from sessions.units import sizes_apart

    assert sizes_apart(2_000_001, 2_000_000) == ("2,000,001 bytes", "2,000,000 bytes")
    assert sizes_apart(5_200, 4_000) == ("5.2 KB", "4.0 KB")
    assert sizes_apart(20, 0) == ("20 B", "0 B")
