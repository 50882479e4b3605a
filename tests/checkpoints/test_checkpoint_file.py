"""Checkpoint files: layout, verification of every field, atomic writes, permissions."""

from __future__ import annotations

import os
import stat
import struct
import subprocess
import sys
import textwrap
import time
import zlib
from array import array
from hashlib import blake2b
from pathlib import Path

import pytest

from sessions import durable
from sessions.checkpoints import (
    CheckpointStore,
    InvalidSegmentError,
    PrefixHasher,
    Segment,
    StateCompat,
    prefix_hash,
)
from sessions.checkpoints.errors import CorruptCheckpointError
from sessions.checkpoints.file_format import HEADER_SIZE, crc32, encode_header, parse_header
from sessions.checkpoints.keys import address

REPO = Path(__file__).resolve().parents[2]
COMPAT = StateCompat("sha256:" + "ab" * 32, "type_k=f16;type_v=f16;flash_attn=0;n_seq_max=2")
TOKENS = list(range(1000, 1400))


def segment(start: int, end: int, *, compat: StateCompat = COMPAT, size: int = 4096,
            logits: bool = True) -> Segment:
    state = bytes((start * 7 + i) % 251 for i in range(size))
    return Segment(
        compat=compat,
        prefix=prefix_hash(TOKENS[:end]),
        parent=prefix_hash(TOKENS[:start]) if start else None,
        start=start,
        end=end,
        state=state,
        logits=struct.pack("<8f", *range(8)) if logits else None,
    )


class Problems(list):
    """Collects on_problem reports."""

    def matching(self, *words: str) -> list[str]:
        return [m for m in self if all(w in m for w in words)]


@pytest.fixture
def problems() -> Problems:
    return Problems()


def open_store(folder: Path, problems: Problems, **kwargs) -> CheckpointStore:
    kwargs.setdefault("ram_bytes", 1 << 20)
    kwargs.setdefault("disk_bytes", 1 << 24)
    return CheckpointStore(folder, on_problem=problems.append, **kwargs)


def saved(folder: Path, *segments: Segment) -> list[Path]:
    with open_store(folder, Problems()) as store:
        for seg in segments:
            store.put(seg)
    return [folder / address(seg.compat, seg.prefix) for seg in segments]


def test_prefix_hash_is_blake2b_of_little_endian_int32() -> None:
    tokens = [1, 2, 300000, 2**31 - 1]
    expected = blake2b(struct.pack("<4i", *tokens), digest_size=16).hexdigest()
    assert prefix_hash(tokens) == expected
    assert prefix_hash(tokens[:3]) != expected
    assert prefix_hash([]) != prefix_hash([0])


def test_prefix_hash_accepts_arrays_and_rejects_out_of_range_tokens() -> None:
    assert prefix_hash(array("i", TOKENS)) == prefix_hash(TOKENS)
    with pytest.raises(InvalidSegmentError, match="32-bit"):
        prefix_hash([2**31])


def test_incremental_hasher_equals_hashing_the_whole_prefix() -> None:
    hasher = PrefixHasher(TOKENS[:100])
    fork = hasher.copy().extend(TOKENS[300:310])
    hasher.extend(TOKENS[100:250]).extend(TOKENS[250:260])
    assert (hasher.hexdigest(), hasher.count) == (prefix_hash(TOKENS[:260]), 260)
    assert fork.hexdigest() == prefix_hash(TOKENS[:100] + TOKENS[300:310])


def test_header_round_trip_keeps_every_field() -> None:
    seg = segment(100, 250)
    header = parse_header(encode_header(seg))
    assert len(encode_header(seg)) == HEADER_SIZE
    assert (header.start, header.end, header.prefix, header.parent) == (100, 250, seg.prefix, seg.parent)
    assert header.fingerprint_id == COMPAT.fingerprint_id
    assert header.params_digest == COMPAT.params_digest
    assert (header.state_len, header.logits_len, header.has_logits) == (4096, 32, True)


def test_a_snapshot_file_says_whether_it_is_a_branch_s_latest_prompt_end_or_tip(tmp_path, problems) -> None:
    """The role survives a restart (the engine replaces such snapshots as a branch grows);
    files written before it existed read as kept for good."""
    snaps = {role: Segment(COMPAT, prefix_hash(TOKENS[:end]), None, end, end, b"w" * 64, None,
                           kind="snapshot", role=role)
             for role, end in (("", 10), ("prompt", 20), ("tip", 30))}
    for role, snap in snaps.items():
        assert parse_header(encode_header(snap)).role == role
    saved(tmp_path, *snaps.values())
    with open_store(tmp_path, problems) as store:
        for role, snap in snaps.items():
            assert store.peek(COMPAT, snap.prefix, "snapshot").role == role
            assert store.get(COMPAT, snap.prefix, "snapshot").role == role
    with pytest.raises(InvalidSegmentError, match="role"):
        Segment(COMPAT, snaps["tip"].prefix, None, 0, 30, b"x", None, role="tip")  # cells have none
    raw = bytearray(encode_header(snaps["tip"]))
    raw[116:120] = struct.pack("<I", 7)  # a role this version does not know
    raw[120:HEADER_SIZE] = blake2b(bytes(raw[:120]), digest_size=16).digest()
    with pytest.raises(CorruptCheckpointError, match="inconsistent"):
        parse_header(bytes(raw))
    assert problems == []


@pytest.mark.parametrize(
    ("start", "end", "parent", "match"),
    [(5, 5, "0" * 32, "empty"), (0, 3, "0" * 32, "parent"), (2, 3, None, "parent"), (0, 3, None, None)],
)
def test_segment_rejects_inconsistent_ranges(start, end, parent, match) -> None:
    make = lambda: Segment(COMPAT, "1" * 32, parent, start, end, b"x", None)  # noqa: E731
    if match is None:
        assert make().n_tokens == end - start
    else:
        with pytest.raises(InvalidSegmentError, match=match):
            make()


def test_disk_round_trip_preserves_missing_and_present_logits(tmp_path, problems) -> None:
    with_logits, without = segment(0, 100), segment(100, 200, logits=False)
    saved(tmp_path, with_logits, without)
    with open_store(tmp_path, problems) as store:
        assert store.get(COMPAT, with_logits.prefix) == with_logits
        got = store.get(COMPAT, without.prefix)
        assert got == without and got.logits is None
    assert problems == []


def _flip(offset: int):
    def corrupt(path: Path) -> None:
        data = bytearray(path.read_bytes())
        data[offset] ^= 0x10
        path.write_bytes(bytes(data))
    return corrupt


CORRUPTIONS = {
    "truncated": (lambda p: p.write_bytes(p.read_bytes()[:-1]), "truncated"),
    "cut inside header": (lambda p: p.write_bytes(p.read_bytes()[:40]), "truncated"),
    "trailing bytes": (lambda p: p.write_bytes(p.read_bytes() + b"\0"), "size mismatch"),
    "payload bit": (_flip(HEADER_SIZE + 1234), "checksum mismatch"),
    "logits bit": (_flip(-1), "checksum mismatch"),
    "header start field bit": (_flip(44), "header checksum mismatch"),
    "header checksum bit": (_flip(HEADER_SIZE - 1), "header checksum mismatch"),
    "magic": (_flip(0), "bad magic"),
    "version": (_flip(8), "format version"),
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_corrupt_file_is_deleted_reported_and_never_returned(tmp_path, problems, kind) -> None:
    seg = segment(0, 120)
    (path,) = saved(tmp_path, seg)
    corrupt, reason = CORRUPTIONS[kind]
    corrupt(path)
    with open_store(tmp_path, problems) as store:
        assert store.get(COMPAT, seg.prefix) is None
        assert not path.exists()
        assert store.stats().corrupt_deleted == 1
    (message,) = problems
    assert f"checkpoint {path.name} was corrupt ({reason}" in message
    assert "deleted" in message and "recomputed" in message


def test_payload_damaged_after_start_is_caught_on_read(tmp_path, problems) -> None:
    seg = segment(0, 120)
    (path,) = saved(tmp_path, seg)
    with open_store(tmp_path, problems, ram_bytes=0) as store:
        assert store.where(COMPAT, seg.prefix) == "disk"
        _flip(HEADER_SIZE + 7)(path)
        assert store.get(COMPAT, seg.prefix) is None
        assert store.where(COMPAT, seg.prefix) is None
    assert problems.matching(path.name, "checksum mismatch", "deleted")


def test_file_swapped_to_another_prefix_address_is_rejected(tmp_path, problems) -> None:
    first, second = segment(0, 100), segment(100, 200)
    path_first, path_second = saved(tmp_path, first, second)
    os.replace(path_first, path_second)
    with open_store(tmp_path, problems) as store:
        assert store.get(COMPAT, second.prefix) is None
        assert store.get(COMPAT, first.prefix) is None
    assert not path_second.exists()
    assert problems.matching(path_second.name, "holds prefix", "deleted")


@pytest.mark.parametrize(
    ("other", "reason"),
    [
        (StateCompat("sha256:" + "cd" * 32, COMPAT.params), "another model"),
        (StateCompat(COMPAT.model_fingerprint, COMPAT.params + ";swa_full=0"), "other context settings"),
    ],
)
def test_file_of_another_model_or_settings_is_rejected(tmp_path, problems, other, reason) -> None:
    seg = segment(0, 100)
    (path,) = saved(tmp_path, seg)
    foreign = tmp_path / address(other, seg.prefix)
    foreign.parent.mkdir(mode=0o700, exist_ok=True)
    foreign.write_bytes(path.read_bytes())
    with open_store(tmp_path, problems) as store:
        assert store.get(other, seg.prefix) is None
        assert not foreign.exists()
        assert store.get(COMPAT, seg.prefix) == seg
    assert problems.matching(foreign.name, reason, "deleted")


def test_same_prefix_for_another_model_is_a_miss_not_a_hit(tmp_path, problems) -> None:
    seg = segment(0, 100)
    saved(tmp_path, seg)
    twin = StateCompat("sha256:" + "ef" * 32, COMPAT.params)
    with open_store(tmp_path, problems) as store:
        assert not store.has(twin, seg.prefix)
        assert store.get(twin, seg.prefix) is None
        assert store.stats().misses == 1
    assert problems == []


def test_no_partial_file_is_visible_when_a_write_fails_before_rename(tmp_path, problems, monkeypatch) -> None:
    seg = segment(0, 100)
    final = tmp_path / address(COMPAT, seg.prefix)
    seen: list[tuple[bool, int]] = []

    def crash(temp, path):
        seen.append((Path(path).exists(), Path(temp).stat().st_size))
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(durable.os, "replace", crash)
    with open_store(tmp_path, problems) as store:
        store.put(seg)
        assert store.flush(timeout=30)
        assert store.get(COMPAT, seg.prefix) == seg  # still served from RAM
        assert store.stats().write_errors == 1
    assert seen == [(False, HEADER_SIZE + seg.nbytes)]
    assert not final.exists()
    assert list(final.parent.iterdir()) == []
    assert problems.matching("could not be written", "Input/output error")


def test_temp_file_of_a_crashed_process_is_ignored_and_removed_on_start(tmp_path, problems) -> None:
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(REPO)!r})
        from sessions import durable
        from sessions.checkpoints import CheckpointStore, Segment, StateCompat
        durable.os.replace = lambda src, dst: os._exit(17)
        store = CheckpointStore({str(tmp_path)!r}, ram_bytes=1 << 20, disk_bytes=1 << 20)
        store.put(Segment(StateCompat("m", "p"), "1" * 32, None, 0, 10, b"s" * 5000, None))
        store.flush()
    """)
    done = subprocess.run([sys.executable, "-c", script], timeout=120)
    assert done.returncode == 17
    leftovers = list(tmp_path.glob("*/*.tmp"))
    assert len(leftovers) == 1 and leftovers[0].stat().st_size > 5000
    assert list(tmp_path.glob("*/*.ckpt")) == []
    compat = StateCompat("m", "p")
    with open_store(tmp_path, problems) as store:
        assert store.flush(timeout=30)
        assert store.get(compat, "1" * 32) is None
        assert store.stats().disk_count == 0
    assert not leftovers[0].exists()
    assert problems == []


def test_temp_file_of_a_live_writer_is_kept_until_stale(tmp_path, problems) -> None:
    seg = segment(0, 100)
    (path,) = saved(tmp_path, seg)
    live = path.with_name(f".{path.name}.{os.getpid()}.0123abcd.tmp")
    live.write_bytes(b"half")
    with open_store(tmp_path, problems) as store:
        assert store.flush(timeout=30)
    assert live.exists()
    hours_ago = time.time() - 2 * durable.STALE_TEMP_SECONDS
    os.utime(live, (hours_ago, hours_ago))
    with open_store(tmp_path, problems) as store:
        assert store.flush(timeout=30)
        assert store.get(COMPAT, seg.prefix) == seg
    assert not live.exists()


def test_files_are_0600_and_folders_0700_whatever_the_umask(tmp_path, problems) -> None:
    folder = tmp_path / "checkpoints"
    old = os.umask(0o022)
    try:
        (path,) = saved(folder, segment(0, 100))
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700


def test_the_checksum_is_zlibs_crc32_whichever_library_computes_it():
    """Files written before the faster CRC-32 (and by a machine without it) stay valid."""
    data = os.urandom(1 << 20) + b"tail"
    assert crc32(data) == zlib.crc32(data)
    pieces = [memoryview(data)[a : a + 77_777] for a in range(0, len(data), 77_777)]
    running = 0
    for piece in pieces:
        running = crc32(piece, running)
    assert running == zlib.crc32(data)
    assert crc32(b"") == 0
