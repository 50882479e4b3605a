"""A model file's identity, for checkpoints and frozen tokens, in milliseconds.

A llama.cpp state blob carries no model identity: a different GGUF of the same shape
restores silently and then produces garbage. Every checkpoint (and every message's frozen
token ids) is therefore filed under a fingerprint of the model file.

Hashing all of a multi-gigabyte file takes seconds at every load. The fingerprint hashes
what tells two models apart instead: the file size, the first ``HEAD_BYTES`` (the GGUF
header: architecture, hyperparameters, the whole vocabulary and chat template, the tensor
table with every tensor's name, shape, type and offset, and the first weights) and
``SAMPLES`` blocks spread evenly over the rest. Two files of the same shape with other
weights (another fine-tune, another quantisation, a re-download of a different revision)
differ in every block, so a swapped model is always noticed; a file edited in a few
bytes outside the sampled blocks would not be, which no model update does.

Nothing is cached on disk: at a few milliseconds there is nothing to save, and a cache
file would be one more thing that can hand out a wrong identity.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

VERSION = "gguf-sampled-1"
HEAD_BYTES = 8 << 20
SAMPLES = 64
SAMPLE_BYTES = 64 << 10
_CHUNK = 8 << 20


def model_fingerprint(path: Path | str) -> str:
    """The identity of a model file (``VERSION:`` then 40 hex digits)."""
    digest = hashlib.blake2b(digest_size=20)
    with open(path, "rb", buffering=0) as handle:
        size = os.fstat(handle.fileno()).st_size
        digest.update(f"{VERSION};{size};".encode())
        digest.update(handle.read(min(size, HEAD_BYTES)))
        rest = size - HEAD_BYTES
        if rest > 0:
            step = max(1, rest // SAMPLES)
            for i in range(SAMPLES):
                offset = HEAD_BYTES + i * step
                if offset >= size:
                    break
                digest.update(os.pread(handle.fileno(), SAMPLE_BYTES, offset))
    return f"{VERSION}:{digest.hexdigest()}"


def legacy_fingerprint(path: Path | str) -> str:
    """The identity earlier versions gave a file: a digest of all of its bytes.

    Only computed to carry the frozen tokens of sessions made then over to
    ``model_fingerprint`` (once per file), never at a normal load.
    """
    digest = hashlib.blake2b(digest_size=20)
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def is_legacy(fingerprint: str) -> bool:
    return ":" not in fingerprint and len(fingerprint) == 40
