"""The writer's queue: writes and deletions of one key in order, and what a full queue drops."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sessions.checkpoints import CheckpointStore, Segment
from sessions.checkpoints.keys import address
from tests.checkpoints.test_checkpoint_store import COMPAT, WAIT, SlowDisk, chain, snapshot


@pytest.fixture
def problems() -> list[str]:
    return []


def on_disk(tmp_path, *segments: Segment) -> None:
    """Write ``segments`` through a store that is then closed (its index is rebuilt on reopening)."""
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24) as first:
        for segment in segments:
            first.put(segment)
        assert first.flush(WAIT)


def file_of(tmp_path, segment: Segment):
    return tmp_path / address(COMPAT, segment.prefix, segment.kind)


def test_a_put_after_a_queued_deletion_keeps_the_file(tmp_path, monkeypatch, problems) -> None:
    """What ``Captures.note_end`` does: a snapshot whose file is about to go is worth the disk again."""
    snap, other = snapshot(60), snapshot(70)
    on_disk(tmp_path, snap)
    disk = SlowDisk(monkeypatch)
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24,
                         on_problem=problems.append) as store, disk:  # the disk is released first
        store.put(other)
        assert disk.entered.wait(WAIT)  # the writer holds ``other``: what follows stays queued
        store.drop_from_disk(COMPAT, snap.prefix, "snapshot")
        assert not store.persisted(COMPAT, snap.prefix, "snapshot")
        store.put(snap, persist=True)
        assert store.persisted(COMPAT, snap.prefix, "snapshot")
        disk.release.set()
        assert store.flush(WAIT)
        assert file_of(tmp_path, snap).is_file()
        assert store.persisted(COMPAT, snap.prefix, "snapshot")
    assert problems == []


def test_a_put_after_a_queued_deletion_files_its_new_role(tmp_path, monkeypatch) -> None:
    """An old tip put back as the prompt end before its deletion ran: the file must say
    "prompt" from then on, or the next process takes it for the old tip and deletes it."""
    tip, other = replace(snapshot(60), role="tip"), snapshot(70)
    on_disk(tmp_path, tip)
    disk = SlowDisk(monkeypatch)
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24) as store, disk:
        store.put(other)
        assert disk.entered.wait(WAIT)
        store.drop_from_disk(COMPAT, tip.prefix, "snapshot")
        store.put(replace(tip, role="prompt"), persist=True)
        disk.release.set()
        assert store.flush(WAIT)
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24) as reopened:
        meta = reopened.peek(COMPAT, tip.prefix, "snapshot")
        assert meta is not None and meta.tier == "disk" and meta.role == "prompt"


def test_a_put_during_the_deletion_of_its_file_writes_it_again(tmp_path, monkeypatch, problems) -> None:
    snap = snapshot(80)
    on_disk(tmp_path, snap)
    deletion = SlowDisk(monkeypatch, "remove")
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24,
                         on_problem=problems.append) as store, deletion:
        store.drop_from_disk(COMPAT, snap.prefix, "snapshot")
        assert deletion.entered.wait(WAIT)  # the writer is deleting it, the index still lists it
        assert not store.persisted(COMPAT, snap.prefix, "snapshot")
        store.put(snap, persist=True)
        deletion.release.set()
        assert store.flush(WAIT)
        assert file_of(tmp_path, snap).is_file()
        assert store.persisted(COMPAT, snap.prefix, "snapshot")
        assert store.stats().writes == 1
    assert problems == []


def test_a_segment_larger_than_the_queue_goes_in_alone_and_deletions_stay(tmp_path, monkeypatch) -> None:
    """A window larger than the queue's bound still reaches the disk (the writes before it
    make way), and a deletion queued meanwhile is still carried out."""
    gone = snapshot(90)
    on_disk(tmp_path, gone)
    first, queued = chain([0, 10, 20], size=2048)
    (huge,) = chain([0, 30], size=8192)
    disk = SlowDisk(monkeypatch)
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24, queue_bytes=5000) as store, disk:
        store.put(first)
        assert disk.entered.wait(WAIT)
        store.drop_from_disk(COMPAT, gone.prefix, "snapshot")
        store.put(queued)
        store.put(huge)
        stats = store.stats()
        assert (stats.dropped_writes, stats.pending_writes) == (1, 2)  # ``queued`` made way; ``first``, ``huge``
        disk.release.set()
        assert store.flush(WAIT)
        # ``queued``, dropped for room, is written once the queue has drained (still in RAM)
        assert [file_of(tmp_path, s).is_file() for s in (first, queued, huge, gone)] == [True, True, True, False]


def test_a_full_queue_drops_writes_never_deletions(tmp_path, monkeypatch) -> None:
    gone = [snapshot(end) for end in (100, 110, 120)]
    on_disk(tmp_path, *gone)
    segments = chain([0, 10, 20, 30, 40], size=1024)
    disk = SlowDisk(monkeypatch)
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24, queue_items=2) as store, disk:
        store.put(segments[0])
        assert disk.entered.wait(WAIT)
        for snap in gone:
            store.drop_from_disk(COMPAT, snap.prefix, "snapshot")
        for segment in segments[1:]:
            store.put(segment)
        assert store.stats().dropped_writes == 1  # the oldest queued write, not a deletion
        disk.release.set()
        assert store.flush(WAIT)
        assert [file_of(tmp_path, s).is_file() for s in segments] == [True] * 4  # the dropped one, later
        assert not any(file_of(tmp_path, s).exists() for s in gone)


def test_a_dropped_write_is_written_later_unless_ram_let_it_go_or_it_was_deleted(tmp_path, monkeypatch) -> None:
    """A prefill whose states come faster than the disk takes them (a hybrid's are 50 to
    150 MB each): the writes dropped for room are written once the queue has drained, those
    the RAM tier still holds; one deleted meanwhile stays deleted. The RAM tier keeps the
    dropped ones before those still queued, so it loses one only when the burst is larger
    than it and the queue together (here four and two, for seven)."""
    segments = chain(list(range(0, 90, 10)), size=1024)  # eight
    disk = SlowDisk(monkeypatch)
    with CheckpointStore(tmp_path, ram_bytes=4 * 1100, disk_bytes=1 << 24, queue_items=2) as store, disk:
        store.put(segments[0])
        assert disk.entered.wait(WAIT)  # the writer holds the first: the rest queue, two at a time
        for segment in segments[1:]:
            store.put(segment)
        assert store.stats().dropped_writes == 5
        deleted = segments[3]
        store.drop_from_disk(COMPAT, deleted.prefix)
        in_ram = [store.where(COMPAT, s.prefix) == "ram" for s in segments]
        disk.release.set()
        assert store.flush(WAIT)
        written = [file_of(tmp_path, s).is_file() for s in segments]
    assert all(in_ram[1:5])  # the dropped ones kept, queued ones let go instead
    assert not written[3]  # deleted
    # Seven came behind the one being written, one more than the RAM tier and the queue
    # hold together: one was lost (a queued one RAM let go, dropped by the queue after).
    assert sum(not w for i, w in enumerate(written) if i != 3) == 1
