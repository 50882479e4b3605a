"""The on-disk layout of one checkpoint file, and every check a reader makes.

A checkpoint file is a cache entry that must never be trusted blindly: llama.cpp restores
a state of the wrong model silently and produces garbage, and a torn or bit-flipped file
must not reach the context. So the header repeats everything the file's name promises and
carries two checksums, and a reader checks all of it before a byte of payload is used.

Layout (all integers little-endian, fixed size, ``HEADER_SIZE`` = 156 bytes)::

    offset size  field
         0    8  magic            b"LLCKPT\\r\\n" (catches text-mode mangling)
         8    2  version          uint16, FORMAT_VERSION
        10    2  flags            uint16: 1 = has parent, 2 = has logits
        12   16  fingerprint id   blake2b-128 of the model fingerprint string
        28   16  params digest    blake2b-128 of the canonical context params string
        44    8  start            uint64, first token position
        52    8  end              uint64, one past the last token position
        60   16  prefix           blake2b-128 of tokens[:end]  (the file's address)
        76   16  parent           blake2b-128 of tokens[:start], zeros when none
        92    8  state length     uint64
       100    8  logits length    uint64 (a multiple of 4: float32)
       108   32  payload checksum blake2b-256 over state then logits
       140   16  header checksum  blake2b-128 over bytes 0..139
       156    …  state bytes, then logits bytes; the file ends exactly there

A change of layout bumps ``FORMAT_VERSION``; files of another version are deleted like
corrupt ones (checkpoints are a cache: the tokens are simply recomputed).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from hashlib import blake2b

from .errors import CorruptCheckpointError
from .keys import HASH_BYTES, ParsedAddress, StateCompat
from .segment import LOGIT_BYTES, Segment

MAGIC = b"LLCKPT\r\n"
FORMAT_VERSION = 1
FLAG_HAS_PARENT = 1
FLAG_HAS_LOGITS = 2
_KNOWN_FLAGS = FLAG_HAS_PARENT | FLAG_HAS_LOGITS
PAYLOAD_CHECKSUM_BYTES = 32

_BODY = struct.Struct("<8sHH16s16sQQ16s16sQQ32s")
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
    payload_checksum: bytes

    @property
    def file_size(self) -> int:
        return HEADER_SIZE + self.state_len + self.logits_len


def payload_checksum(state: bytes, logits: bytes | None) -> bytes:
    digest = blake2b(digest_size=PAYLOAD_CHECKSUM_BYTES)
    digest.update(state)
    if logits:
        digest.update(logits)
    return digest.digest()


def encode_header(segment: Segment) -> bytes:
    """The header bytes for ``segment``; the payloads follow it unchanged."""
    flags = (FLAG_HAS_PARENT if segment.parent is not None else 0) | (
        FLAG_HAS_LOGITS if segment.logits is not None else 0
    )
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
        payload_checksum(segment.state, segment.logits),
    )
    return body + blake2b(body, digest_size=HASH_BYTES).digest()


def parse_header(raw: bytes) -> Header:
    """Parse and self-check a header; raises ``CorruptCheckpointError`` with the reason."""
    if len(raw) < HEADER_SIZE:
        raise CorruptCheckpointError(f"truncated: {len(raw)} bytes, shorter than a header")
    body, stored = raw[: _BODY.size], raw[_BODY.size : HEADER_SIZE]
    (magic, version, flags, fingerprint_id, params_digest, start, end, prefix, parent,
     state_len, logits_len, checksum) = _BODY.unpack(body)
    if magic != MAGIC:
        raise CorruptCheckpointError("bad magic bytes: not a checkpoint file")
    if version != FORMAT_VERSION:
        raise CorruptCheckpointError(
            f"format version {version} is not supported (this version reads {FORMAT_VERSION})"
        )
    if blake2b(body, digest_size=HASH_BYTES).digest() != stored:
        raise CorruptCheckpointError("header checksum mismatch")
    has_parent = bool(flags & FLAG_HAS_PARENT)
    if flags & ~_KNOWN_FLAGS or not 0 <= start < end or has_parent != (start > 0):
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
        payload_checksum=checksum,
    )


def check_header(header: Header, expected: ParsedAddress, file_size: int) -> None:
    """Check that a header is what its address promises and that the file is whole."""
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


def expected_address(compat: StateCompat, prefix: str) -> ParsedAddress:
    return ParsedAddress(compat.fingerprint_id, compat.params_digest, prefix)


def build_segment(compat: StateCompat, header: Header, state: bytes, logits: bytes) -> Segment:
    """The segment a verified file holds; raises if the payload checksum disagrees."""
    if len(state) != header.state_len or len(logits) != header.logits_len:
        raise CorruptCheckpointError("truncated while reading")
    if payload_checksum(state, logits) != header.payload_checksum:
        raise CorruptCheckpointError("checksum mismatch")
    return Segment(
        compat=compat,
        prefix=header.prefix,
        parent=header.parent,
        start=header.start,
        end=header.end,
        state=state,
        logits=logits if header.has_logits else None,
    )
