"""The disk tier facing damaged files, a folder that fails while it is scanned, and races with deletions."""

from __future__ import annotations

import errno
import struct
from pathlib import Path

import numpy as np
import pytest

from sessions.checkpoints import CheckpointStore, Segment, prefix_hash
from sessions.checkpoints import disk_tier as disk_tier_module
from sessions.checkpoints.disk_tier import DiskTier
from sessions.checkpoints.file_format import HEADER_SIZE
from sessions.checkpoints.keys import address
from sessions.llama.state_blob import LayoutError, StateLayout
from tests.checkpoints.test_checkpoint_queue import file_of, on_disk
from tests.checkpoints.test_checkpoint_store import COMPAT, TOKENS, WAIT, chain, snapshot
from tests.engine.test_joined_cells import LAYERS, state

LAYOUT = StateLayout()


@pytest.fixture
def problems() -> list[str]:
    return []


def cells_file(tmp_path) -> tuple[Segment, Path]:
    """A cells checkpoint of 4 cells whose state is laid out as llama.cpp writes it, on disk."""
    segment = Segment(COMPAT, prefix_hash(TOKENS[:4]), None, 0, 4, state([0, 1, 2, 3]).tobytes(), bytes(8))
    on_disk(tmp_path, segment)
    return segment, tmp_path / address(COMPAT, segment.prefix)


def probing_place(span, read_at):
    """What a restore's ``place`` does with a file before it knows the layout: probe, or decline."""
    try:
        LAYOUT.probe_shape(read_at, span.state_len)
    except LayoutError:
        return None
    return [np.empty(span.state_len, dtype=np.uint8).data]


def test_a_damaged_last_row_size_is_a_corrupt_file_not_an_unreadable_one(tmp_path, problems) -> None:
    segment, path = cells_file(tmp_path)
    at, row = LAYOUT.rows_offsets(tuple(LAYERS), 4)[-1]
    raw = bytearray(path.read_bytes())
    struct.pack_into("<Q", raw, HEADER_SIZE + at - 8, row + 3)  # its rows now end past the state
    path.write_bytes(bytes(raw))
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24, on_problem=problems.append) as store:
        assert store.read_into(COMPAT, segment.prefix, "cells", probing_place) is None
        assert store.stats().corrupt_deleted == 1
        assert store.where(COMPAT, segment.prefix) is None
    assert not path.exists()
    assert len(problems) == 1 and "corrupt (checksum mismatch) and was deleted" in problems[0]
    with pytest.raises(LayoutError):
        LAYOUT.probe_shape(lambda offset, n: bytes(raw[HEADER_SIZE + offset : HEADER_SIZE + offset + n]),
                           len(segment.state))


def test_a_file_of_another_layout_is_declined_and_kept(tmp_path, problems) -> None:
    """The other side of the test above: a whole file that does not parse is left alone."""
    (segment,) = chain([0, 30])
    on_disk(tmp_path, segment)
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24, on_problem=problems.append) as store:
        assert store.read_into(COMPAT, segment.prefix, "cells", probing_place) is None
        assert store.where(COMPAT, segment.prefix) == "disk"
    assert file_of(tmp_path, segment).is_file() and problems == []


def test_a_scan_that_fails_partway_leaves_a_tier_that_lists_nothing(tmp_path, problems, monkeypatch) -> None:
    snap = snapshot(40)
    (cells,) = chain([0, 30])
    on_disk(tmp_path, snap, cells)
    real_iterdir = Path.iterdir

    def iterdir(folder: Path):
        yield from real_iterdir(folder)
        if folder.parent == tmp_path:  # a model folder: its files are listed, then the disk fails
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(Path, "iterdir", iterdir)
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24, on_problem=problems.append) as store:
        assert store.flush(WAIT)  # the writer built the index, or failed to
        assert store.where(COMPAT, snap.prefix, "snapshot") is None
        assert store.peek(COMPAT, cells.prefix) is None
        assert not store.persisted(COMPAT, snap.prefix, "snapshot")
        assert store.largest(COMPAT.model_fingerprint, "cells") == 0
        assert store.stats().disk_count == 0
    assert file_of(tmp_path, snap).is_file() and file_of(tmp_path, cells).is_file()  # nothing lost
    assert len(problems) == 1 and "cannot be used" in problems[0]


def test_a_read_that_overlaps_the_deletion_of_its_file_does_not_list_it_again(tmp_path, problems, monkeypatch) -> None:
    snap = snapshot(50)
    tier = DiskTier(tmp_path, 1 << 24, problems.append, lambda _key: False)
    tier.save(snap)
    real_read_payload = disk_tier_module.read_payload
    removed: list[bool] = []

    def read_payload(src, length):
        if not removed:  # the writer deletes the file while this read has it open
            removed.append(True)
            tier.remove(snap.key)
        return real_read_payload(src, length)

    monkeypatch.setattr(disk_tier_module, "read_payload", read_payload)
    assert tier.load(COMPAT, snap.prefix, "snapshot") == snap  # what was read is whole
    assert removed and not file_of(tmp_path, snap).exists()
    assert not tier.known(snap.key) and tier.totals() == (0, 0)
    assert problems == []


def test_a_read_that_opens_a_file_the_index_just_dropped_does_not_list_it_again(tmp_path, problems,
                                                                                   monkeypatch) -> None:
    """The deletion took the entry off the index before the read began, and unlinks the file during it."""
    snap = snapshot(55)
    tier = DiskTier(tmp_path, 1 << 24, problems.append, lambda _key: False)
    tier.save(snap)
    real_delete = DiskTier._delete_evicted
    held: list = []
    monkeypatch.setattr(DiskTier, "_delete_evicted", lambda _tier, victims: held.extend(victims))
    tier.remove(snap.key)  # off the index; its file is not unlinked yet
    assert held and file_of(tmp_path, snap).exists()
    real_read_payload = disk_tier_module.read_payload

    def read_payload(src, length):
        if held:
            real_delete(tier, [held.pop()])
        return real_read_payload(src, length)

    monkeypatch.setattr(disk_tier_module, "read_payload", read_payload)
    assert tier.load(COMPAT, snap.prefix, "snapshot") == snap
    assert not held and not file_of(tmp_path, snap).exists()
    assert not tier.known(snap.key) and tier.totals() == (0, 0)
    assert problems == []


def test_a_file_another_process_wrote_is_listed_once_read(tmp_path, problems) -> None:
    snap = snapshot(60)
    tier = DiskTier(tmp_path, 1 << 24, problems.append, lambda _key: False)
    tier.ensure_index()
    on_disk(tmp_path, snap)
    assert not tier.known(snap.key)
    assert tier.load(COMPAT, snap.prefix, "snapshot") == snap
    assert tier.known(snap.key)
    assert problems == []


def test_a_file_another_process_deleted_is_a_miss_not_a_problem(tmp_path, problems) -> None:
    """``llamachat cache clear`` deletes files a running store lists: every way of reading
    one gives None (its tokens are recomputed), the index drops it, and nothing is reported."""
    cells, snap = chain([0, 8, 16])[1], snapshot(60)
    on_disk(tmp_path, cells)
    on_disk(tmp_path, snap)
    with CheckpointStore(tmp_path, ram_bytes=0, disk_bytes=1 << 24, on_problem=problems.append) as store:
        assert store.where(COMPAT, cells.prefix) == "disk" and store.where(COMPAT, snap.prefix, "snapshot") == "disk"
        for path in (file_of(tmp_path, cells), file_of(tmp_path, snap)):
            path.unlink()
        assert store.get(COMPAT, cells.prefix) is None
        assert store.read_into(COMPAT, snap.prefix, "snapshot", lambda span, read_at: None) is None
        assert store.where(COMPAT, cells.prefix) is None and store.where(COMPAT, snap.prefix, "snapshot") is None
        stats = store.stats()
        assert (stats.misses, stats.disk_count, stats.corrupt_deleted) == (2, 0, 0)
        store.put(cells)  # computed again, it is written again
        assert store.flush(WAIT) and file_of(tmp_path, cells).exists()
    assert problems == []
