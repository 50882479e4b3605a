"""Reading a checkpoint file straight into the caller's buffers, as a restore does."""

from __future__ import annotations

import os

import numpy as np
import pytest

from sessions.checkpoints import CheckpointStore, Placed, Segment
from sessions.checkpoints.file_format import HEADER_SIZE
from sessions.checkpoints.file_reads import read_pieces
from sessions.checkpoints.keys import address
from tests.checkpoints.test_checkpoint_store import COMPAT, WAIT, chain


def on_disk(tmp_path, segments: list[Segment]) -> None:
    """Write ``segments`` to disk through a store that is then closed."""
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24) as first:
        for segment in segments:
            first.put(segment)
        assert first.flush(WAIT)


def split_into(sizes: list[int], calls: list[tuple]) -> tuple[np.ndarray, object]:
    """A buffer and a ``place`` that cuts the state into pieces of ``sizes`` (the rest last)."""
    out = np.zeros(4096, dtype=np.uint8)

    def place(header, read_at):
        calls.append((header.start, header.end, read_at(0, 4)))
        cuts = np.cumsum([0, *sizes, header.state_len - sum(sizes)])
        return [out[a:b].data for a, b in zip(cuts[:-1], cuts[1:], strict=True)]

    return out, place


@pytest.fixture
def problems() -> list[str]:
    return []


def test_a_file_is_read_into_the_pieces_given_and_not_kept_in_ram(tmp_path, problems) -> None:
    segment = chain([0, 40], size=2048)[0]
    on_disk(tmp_path, [segment])
    calls: list[tuple] = []
    out, place = split_into([10, 0, 1000], calls)
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24, on_problem=problems.append) as store:
        got = store.read_into(COMPAT, segment.prefix, "cells", place)
        assert isinstance(got, Placed)
        assert (got.start, got.end, got.nbytes) == (0, 40, segment.nbytes)
        assert bytes(out[:2048]) == segment.state
        assert got.logits is not None and bytes(got.logits) == segment.logits
        assert calls == [(0, 40, segment.state[:4])]  # the reader gives the state, not the header
        assert store.where(COMPAT, segment.prefix) == "disk"  # the page cache keeps it, not the RAM tier
        assert store.stats().hits_disk == 1
    assert problems == []


def test_a_file_the_index_lists_is_read_with_one_system_call(tmp_path, problems, monkeypatch) -> None:
    """Header, state, logits and the byte past the end in one scatter read; nothing else
    (no open file object, no ``fstat``, no separate header read)."""
    segment = chain([0, 40], size=2048)[0]
    on_disk(tmp_path, [segment])
    out, place = split_into([10, 1000], [])
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24, on_problem=problems.append) as store:
        assert store.where(COMPAT, segment.prefix) == "disk"  # the index is built now
        reads: list[int] = []
        real_preadv = os.preadv

        def preadv(fd, buffers, offset):
            reads.append(len(buffers))
            return real_preadv(fd, buffers, offset)

        monkeypatch.setattr(os, "preadv", preadv)
        monkeypatch.setattr(os, "fstat", lambda fd: pytest.fail("a file the index lists needs no fstat"))
        got = store.read_into(COMPAT, segment.prefix, "cells", place)
        assert isinstance(got, Placed) and got.logits is not None and bytes(got.logits) == segment.logits
        assert bytes(out[:2048]) == segment.state
        assert reads == [1 + 3 + 1 + 1]  # header, the three pieces, logits, the byte past the end
    assert problems == []


@pytest.mark.parametrize("change", ["a byte appended", "cut short", "another state length"])
def test_a_file_that_changed_since_it_was_listed_is_checked_and_refused(tmp_path, problems, change) -> None:
    """What the index said no longer holds: the checked read finds why, says so, and
    deletes the file; nothing of it is taken."""
    segment = chain([0, 40], size=2048)[0]
    on_disk(tmp_path, [segment])
    path = tmp_path / address(COMPAT, segment.prefix)
    data = path.read_bytes()
    out, place = split_into([], [])
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24, on_problem=problems.append) as store:
        assert store.where(COMPAT, segment.prefix) == "disk"  # listed as it was
        if change == "a byte appended":
            path.write_bytes(data + b"x")
        elif change == "cut short":
            path.write_bytes(data[:-1])
        else:  # a whole, valid file of the same size under the same name: a longer state, no logits
            longer = Segment(COMPAT, segment.prefix, None, 0, 40, bytes(range(256)) * 8 + bytes(16), None)
            on_disk(tmp_path / "elsewhere", [longer])
            path.write_bytes((tmp_path / "elsewhere" / address(COMPAT, segment.prefix)).read_bytes())
        got = store.read_into(COMPAT, segment.prefix, "cells", place)
    if change == "another state length":  # a good file: read the checked way, into the pieces asked then
        assert isinstance(got, Placed) and got.logits is None
        assert bytes(out[: 2048 + 16]) == bytes(range(256)) * 8 + bytes(16)
        assert problems == []
    else:
        assert got is None and not path.exists()
        reason = "size mismatch" if change == "a byte appended" else "truncated"
        assert len(problems) == 1 and reason in problems[0]


def test_a_segment_in_ram_comes_back_whole_and_place_is_not_asked(store_with_one) -> None:
    store, segment = store_with_one
    calls: list[tuple] = []
    _out, place = split_into([], calls)
    assert store.read_into(COMPAT, segment.prefix, "cells", place) is segment
    assert calls == []


@pytest.fixture
def store_with_one(tmp_path):
    segment = chain([0, 12], size=512)[0]
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24) as store:
        store.put(segment)
        yield store, segment


def test_a_flipped_byte_is_caught_over_the_pieces_and_the_file_deleted(tmp_path, problems) -> None:
    segment = chain([0, 40], size=2048)[0]
    on_disk(tmp_path, [segment])
    path = tmp_path / address(COMPAT, segment.prefix)
    data = bytearray(path.read_bytes())
    data[HEADER_SIZE + 1500] ^= 0x10
    path.write_bytes(bytes(data))
    _out, place = split_into([100, 700], [])
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24, on_problem=problems.append) as store:
        assert store.read_into(COMPAT, segment.prefix, "cells", place) is None
        assert store.where(COMPAT, segment.prefix) is None
    assert not path.exists()
    assert len(problems) == 1 and "checksum mismatch" in problems[0] and "deleted" in problems[0]


def test_a_declined_file_is_neither_read_nor_deleted(tmp_path, problems) -> None:
    segment = chain([0, 40], size=2048)[0]
    on_disk(tmp_path, [segment])
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24, on_problem=problems.append) as store:
        assert store.read_into(COMPAT, segment.prefix, "cells", lambda header, read_at: None) is None
        assert store.where(COMPAT, segment.prefix) == "disk"
    assert (tmp_path / address(COMPAT, segment.prefix)).exists() and problems == []


def test_pieces_that_do_not_add_up_to_the_state_are_a_caller_error(tmp_path) -> None:
    segment = chain([0, 40], size=2048)[0]
    on_disk(tmp_path, [segment])
    short = np.zeros(100, dtype=np.uint8)
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24) as store, pytest.raises(ValueError):
        store.read_into(COMPAT, segment.prefix, "cells", lambda header, read_at: [short.data])


def test_more_pieces_than_one_scatter_read_takes(tmp_path) -> None:
    data = bytes(range(256)) * 12
    path = tmp_path / "f"
    path.write_bytes(data)
    out = np.zeros(len(data) - 5, dtype=np.uint8)
    pieces = [out[i : i + 1].data for i in range(1500)] + [out[1500:].data]  # past IOV_MAX
    with open(path, "rb") as src:
        assert read_pieces(src.fileno(), pieces, 5) == len(out)
    assert bytes(out) == data[5:]
    with open(path, "rb") as src:  # a file shorter than the pieces: the count says so
        longer = np.zeros(len(data), dtype=np.uint8)
        assert read_pieces(src.fileno(), [longer[:7].data, longer[7:].data], 5) == len(data) - 5


def test_the_largest_file_of_a_model_whatever_its_params(tmp_path) -> None:
    small, large = chain([0, 10, 20], size=300)
    other_params = COMPAT.__class__(COMPAT.model_fingerprint, "another;params")
    bigger = Segment(other_params, large.prefix, large.parent, 10, 20, bytes(900), None)
    on_disk(tmp_path, [small, large, bigger])
    with CheckpointStore(tmp_path, ram_bytes=1 << 20, disk_bytes=1 << 24) as store:
        assert store.largest(COMPAT.model_fingerprint, "cells") == 900
        assert store.largest(COMPAT.model_fingerprint, "snapshot") == 0
        assert store.largest("sha256:" + "00" * 32, "cells") == 0
