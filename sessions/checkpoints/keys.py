"""Names of checkpoints: prefix hashes, compatibility ids and file addresses.

A checkpoint is useful only to a context that has seen exactly the same tokens, with the
same model file and the same cache layout. Everything here turns those three facts into
short hex strings, so that the same prefix for the same model and settings always lands on
the same key (in RAM) and the same file (on disk), whichever branch produced it.
"""

from __future__ import annotations

import re
import struct
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from hashlib import blake2b
from pathlib import PurePath
from typing import Literal

from .errors import InvalidSegmentError

HASH_BYTES = 16
"""Size of every digest used in keys (prefix hashes, fingerprint and params ids)."""

Kind = Literal["cells", "snapshot"]
"""What a checkpoint holds: the attention cells of a token range, or the state at a point."""
KINDS: tuple[Kind, ...] = ("cells", "snapshot")
SUFFIXES: dict[str, Kind] = {".ckpt": "cells", ".snap": "snapshot"}
FILE_SUFFIX = {kind: suffix for suffix, kind in SUFFIXES.items()}

Key = tuple[str, str, Kind]
"""(compat digest, prefix hash, kind): the identity of a checkpoint in every tier."""

_HEX = re.compile(f"[0-9a-f]{{{2 * HASH_BYTES}}}")
_FILE_NAME = re.compile(f"([0-9a-f]{{{2 * HASH_BYTES}}})-([0-9a-f]{{{2 * HASH_BYTES}}})(\\.ckpt|\\.snap)")

if array("i").itemsize != 4:  # pragma: no cover - every platform CPython supports today
    raise ImportError("sessions.checkpoints needs a 4-byte C int for token hashing")


def _digest(data: bytes) -> bytes:
    return blake2b(data, digest_size=HASH_BYTES).digest()


def _pack(tokens: Sequence[int]) -> bytes:
    if isinstance(tokens, array) and tokens.typecode == "i":
        if sys.byteorder == "big":  # pragma: no cover - no big-endian test machine
            tokens = array("i", tokens)
            tokens.byteswap()
        return tokens.tobytes()
    try:  # struct.pack of a list is about twice as fast as building an array
        return struct.pack(f"<{len(tokens)}i", *tokens)
    except struct.error as error:
        raise InvalidSegmentError(f"token ids must be 32-bit integers: {error}") from None


def prefix_hash(tokens: Sequence[int]) -> str:
    """Hex id of a token prefix: blake2b-128 of the tokens as little-endian int32."""
    return blake2b(_pack(tokens), digest_size=HASH_BYTES).hexdigest()


class PrefixHasher:
    """``prefix_hash`` of a growing token list, without rehashing what came before.

    A long message is checkpointed every few thousand tokens; hashing the whole prefix
    each time would make a 100k-token conversation cost quadratic time.
    """

    def __init__(self, tokens: Sequence[int] = ()) -> None:
        self._hash = blake2b(digest_size=HASH_BYTES)
        self.count = 0
        self.extend(tokens)

    def extend(self, tokens: Sequence[int]) -> PrefixHasher:
        self._hash.update(_pack(tokens))
        self.count += len(tokens)
        return self

    def hexdigest(self) -> str:
        """Equal to ``prefix_hash`` of every token given so far."""
        return self._hash.hexdigest()

    def copy(self) -> PrefixHasher:
        """An independent hasher at the same point (to follow a fork)."""
        twin = PrefixHasher()
        twin._hash = self._hash.copy()
        twin.count = self.count
        return twin


def is_prefix_hash(value: object) -> bool:
    return isinstance(value, str) and _HEX.fullmatch(value) is not None


def fingerprint_id(model_fingerprint: str) -> bytes:
    """The 16-byte id of a model fingerprint (its checkpoint folder's name, in hex)."""
    return _digest(model_fingerprint.encode("utf-8"))


def model_folder(model_fingerprint: str) -> str:
    """The name of the folder a model's checkpoint files are in."""
    return fingerprint_id(model_fingerprint).hex()


def compat_digest(fingerprint_id: bytes, params_digest: bytes) -> str:
    """The compat digest from its two halves, as stored in a file header."""
    return blake2b(fingerprint_id + params_digest, digest_size=HASH_BYTES).hexdigest()


@dataclass(frozen=True)
class StateCompat:
    """What decides whether a state blob can be restored into a context.

    llama.cpp states carry no model identity: a different GGUF of the same shape restores
    silently and yields garbage, and other cache types or stream counts refuse to load. So
    every checkpoint is filed under the model fingerprint and the canonical params string.
    """

    model_fingerprint: str
    """Id of the GGUF file (sha256-based), computed by the engine."""
    params: str
    """Canonical string of the context params that change the state layout."""
    _ids: tuple[bytes, bytes, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.model_fingerprint, str) or not self.model_fingerprint:
            raise InvalidSegmentError("a state compat needs a non-empty model fingerprint")
        if not isinstance(self.params, str):
            raise InvalidSegmentError("the state compat params must be a string")
        model_id = fingerprint_id(self.model_fingerprint)
        params_digest = _digest(self.params.encode("utf-8"))
        ids = (model_id, params_digest, compat_digest(model_id, params_digest))
        object.__setattr__(self, "_ids", ids)

    @property
    def fingerprint_id(self) -> bytes:
        """16-byte digest of the model fingerprint (fixed size, whatever the engine's form)."""
        return self._ids[0]

    @property
    def params_digest(self) -> bytes:
        """16-byte digest of the params string."""
        return self._ids[1]

    def digest(self) -> str:
        """Hex id of (model, params): two compats restore into each other iff equal."""
        return self._ids[2]


def key_of(compat: StateCompat, prefix: str, kind: Kind = "cells") -> Key:
    return (compat.digest(), prefix, kind)


def address(compat: StateCompat, prefix: str, kind: Kind = "cells") -> PurePath:
    """Relative path of a checkpoint file: ``<model id>/<params id>-<prefix>.ckpt|.snap``."""
    return PurePath(address_text(compat, prefix, kind))


def address_text(compat: StateCompat, prefix: str, kind: Kind = "cells") -> str:
    """``address`` as a string, for the restore's reads: building a ``PurePath`` per file
    cost more than the file's open."""
    return f"{compat.fingerprint_id.hex()}/{compat.params_digest.hex()}-{prefix}{FILE_SUFFIX[kind]}"


@dataclass(frozen=True)
class ParsedAddress:
    """What a file's path says it holds; the header must agree with every field."""

    fingerprint_id: bytes
    params_digest: bytes
    prefix: str
    kind: Kind = "cells"

    @property
    def key(self) -> Key:
        return (compat_digest(self.fingerprint_id, self.params_digest), self.prefix, self.kind)


def is_model_folder(name: str) -> bool:
    return _HEX.fullmatch(name) is not None


def parse_address(folder: str, name: str) -> ParsedAddress | None:
    """Parse ``<model id>/<params id>-<prefix>.ckpt|.snap``; None for any other name."""
    match = _FILE_NAME.fullmatch(name)
    if match is None or not is_model_folder(folder):
        return None
    kind = SUFFIXES[match.group(3)]
    return ParsedAddress(bytes.fromhex(folder), bytes.fromhex(match.group(1)), match.group(2), kind)
