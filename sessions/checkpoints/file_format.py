"""The on-disk layout of one checkpoint file, and every check a reader makes.

A checkpoint file is a cache entry that must never be trusted blindly: llama.cpp restores
a state of the wrong model silently and produces garbage, and a torn or bit-flipped file
must not reach the context. So the header repeats everything the file's name promises and
carries checksums, and a reader checks all of it before a byte of payload is used.

Layout (all integers little-endian, fixed size, ``HEADER_SIZE`` = 136 bytes)::

    offset size  field
         0    8  magic            b"LLCKPT\\r\\n" (catches text-mode mangling)
         8    2  version          uint16, FORMAT_VERSION
        10    2  flags            uint16: 1 = has parent, 2 = has logits, 4 = snapshot
        12   16  fingerprint id   blake2b-128 of the model fingerprint string
        28   16  params digest    blake2b-128 of the canonical context params string
        44    8  start            uint64, first token position (= end for a snapshot)
        52    8  end              uint64, one past the last token position
        60   16  prefix           blake2b-128 of tokens[:end]  (the file's address)
        76   16  parent           blake2b-128 of tokens[:start], zeros when none
        92    8  state length     uint64
       100    8  logits length    uint64 (a multiple of 4: float32)
       108    4  state crc32
       112    4  logits crc32
       116    4  role             uint32, snapshots only: 0 kept for good, 1 a branch's
                                    latest prompt end, 2 its tip (replaced as it grows)
       120   16  header checksum  blake2b-128 over bytes 0..119
       136    …  state bytes, then logits bytes; the file ends exactly there

The payload checksums are CRC-32: a restore reads and checks every byte before llama.cpp
sees it, and CRC-32 runs at several GB/s where a cryptographic hash runs at one, which
would make checking cost more than reading. It catches torn writes and flipped bits,
which is what it is for; the header, small, keeps a cryptographic checksum.

A change of layout bumps ``FORMAT_VERSION``; files of another version are deleted like
corrupt ones (checkpoints are a cache: the tokens are simply recomputed).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from hashlib import blake2b

try:
    # ISA-L's CRC-32: the same checksum as zlib's, vectorised (zlib's took a third of a
    # restore's processor time: docs/benchmarks.md, "What the engine's choices rest on").
    from isal.isal_zlib import crc32 as _crc32
except ImportError:  # pragma: no cover - a platform with no isal wheel: same values, slower
    from zlib import crc32 as _crc32

from .errors import CorruptCheckpointError
from .keys import HASH_BYTES, Kind, ParsedAddress, StateCompat
from .segment import LOGIT_BYTES, ROLES, Role, Segment

MAGIC = b"LLCKPT\r\n"
FORMAT_VERSION = 2
FLAG_HAS_PARENT = 1
FLAG_HAS_LOGITS = 2
FLAG_SNAPSHOT = 4
_KNOWN_FLAGS = FLAG_HAS_PARENT | FLAG_HAS_LOGITS | FLAG_SNAPSHOT

_BODY = struct.Struct("<8sHH16s16sQQ16s16sQQIII")
HEADER_SIZE = _BODY.size + HASH_BYTES
_NO_PARENT = bytes(HASH_BYTES)


@dataclass(frozen=True)
class Header:
    """A parsed header whose own checksum has been verified."""

    fingerprint_id: bytes
    params_digest: bytes
    start: int
    end: int
    prefix: str
    parent: str | None
    state_len: int
    logits_len: int
    has_logits: bool
    state_crc: int
    logits_crc: int
    kind: Kind = "cells"
    role: Role = ""

    @property
    def file_size(self) -> int:
        return HEADER_SIZE + self.state_len + self.logits_len


def crc32(data, value: int = 0) -> int:
    """CRC-32 of a buffer, continuing from ``value`` (both libraries release the GIL)."""
    return _crc32(data, value) & 0xFFFFFFFF


def encode_header(segment: Segment) -> bytes:
    """The header bytes for ``segment``; the payloads follow it unchanged."""
    flags = (FLAG_HAS_PARENT if segment.parent is not None else 0) | (
        FLAG_HAS_LOGITS if segment.logits is not None else 0
    ) | (FLAG_SNAPSHOT if segment.kind == "snapshot" else 0)
    body = _BODY.pack(
        MAGIC,
        FORMAT_VERSION,
        flags,
        segment.compat.fingerprint_id,
        segment.compat.params_digest,
        segment.start,
        segment.end,
        bytes.fromhex(segment.prefix),
        bytes.fromhex(segment.parent) if segment.parent is not None else _NO_PARENT,
        len(segment.state),
        len(segment.logits) if segment.logits is not None else 0,
        crc32(segment.state),
        crc32(segment.logits) if segment.logits is not None else 0,
        ROLES.index(segment.role),
    )
    return body + blake2b(body, digest_size=HASH_BYTES).digest()


def parse_header(raw: bytes) -> Header:
    """Parse and self-check a header; raises ``CorruptCheckpointError`` with the reason."""
    if len(raw) < HEADER_SIZE:
        raise CorruptCheckpointError(f"truncated: {len(raw)} bytes, shorter than a header")
    body, stored = raw[: _BODY.size], raw[_BODY.size : HEADER_SIZE]
    (magic, version, flags, fingerprint_id, params_digest, start, end, prefix, parent,
     state_len, logits_len, state_crc, logits_crc, role) = _BODY.unpack(body)
    if magic != MAGIC:
        raise CorruptCheckpointError("bad magic bytes: not a checkpoint file")
    if version != FORMAT_VERSION:
        raise CorruptCheckpointError(
            f"format version {version} is not supported (this version reads {FORMAT_VERSION})"
        )
    if blake2b(body, digest_size=HASH_BYTES).digest() != stored:
        raise CorruptCheckpointError("header checksum mismatch")
    has_parent = bool(flags & FLAG_HAS_PARENT)
    kind: Kind = "snapshot" if flags & FLAG_SNAPSHOT else "cells"
    if kind == "snapshot":
        consistent = 0 < start == end and not has_parent
    else:
        consistent = 0 <= start < end and has_parent == (start > 0)
    if flags & ~_KNOWN_FLAGS or not consistent or role >= len(ROLES) or (role and kind != "snapshot"):
        raise CorruptCheckpointError("header fields are inconsistent")
    has_logits = bool(flags & FLAG_HAS_LOGITS)
    if logits_len % LOGIT_BYTES or (logits_len and not has_logits):
        raise CorruptCheckpointError("header fields are inconsistent")
    return Header(
        fingerprint_id=fingerprint_id,
        params_digest=params_digest,
        start=start,
        end=end,
        prefix=prefix.hex(),
        parent=parent.hex() if has_parent else None,
        state_len=state_len,
        logits_len=logits_len,
        has_logits=has_logits,
        state_crc=state_crc,
        logits_crc=logits_crc,
        kind=kind,
        role=ROLES[role],
    )


def check_header(header: Header, expected: ParsedAddress, file_size: int) -> None:
    """Check that a header is what its address promises and that the file is whole."""
    if header.kind != expected.kind:
        raise CorruptCheckpointError(f"it holds a {header.kind} checkpoint, not the {expected.kind} its name gives")
    if header.fingerprint_id != expected.fingerprint_id:
        raise CorruptCheckpointError("written for another model")
    if header.params_digest != expected.params_digest:
        raise CorruptCheckpointError("written for other context settings")
    if header.prefix != expected.prefix:
        raise CorruptCheckpointError(
            f"it holds prefix {header.prefix[:12]}…, not the {expected.prefix[:12]}… its name gives"
        )
    if file_size < header.file_size:
        raise CorruptCheckpointError(
            f"truncated: {file_size} bytes where the header says {header.file_size}"
        )
    if file_size > header.file_size:
        raise CorruptCheckpointError(
            f"size mismatch: {file_size} bytes where the header says {header.file_size}"
        )


def expected_address(compat: StateCompat, prefix: str, kind: Kind = "cells") -> ParsedAddress:
    return ParsedAddress(compat.fingerprint_id, compat.params_digest, prefix, kind)


def check_payload(header: Header, state, logits) -> None:
    """Raise ``CorruptCheckpointError`` unless the payloads are what the header promises."""
    if len(state) != header.state_len or len(logits) != header.logits_len:
        raise CorruptCheckpointError("truncated while reading")
    if crc32(state) != header.state_crc or (header.has_logits and crc32(logits) != header.logits_crc):
        raise CorruptCheckpointError("checksum mismatch")


def check_placed(header: Header, pieces, state_read: int, logits) -> None:
    """Like ``check_payload`` for a state read into ``pieces`` (its checksum taken over them in order)."""
    if state_read != header.state_len or len(logits) != header.logits_len:
        raise CorruptCheckpointError("truncated while reading")
    crc = 0
    for piece in pieces:
        crc = crc32(piece, crc)
    if crc != header.state_crc or (header.has_logits and crc32(logits) != header.logits_crc):
        raise CorruptCheckpointError("checksum mismatch")


def build_segment(compat: StateCompat, header: Header, state, logits) -> Segment:
    """The segment a verified file holds; raises if a payload checksum disagrees."""
    check_payload(header, state, logits)
    return Segment(
        compat=compat,
        prefix=header.prefix,
        parent=header.parent,
        start=header.start,
        end=header.end,
        state=state,
        logits=logits if header.has_logits else None,
        kind=header.kind,
        role=header.role,
    )
