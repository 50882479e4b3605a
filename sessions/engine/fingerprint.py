"""A model file's identity, for checkpoint files.

A llama.cpp state blob carries no model identity: a different GGUF of the same shape
restores silently and then produces garbage. Every checkpoint therefore records the
fingerprint of the file it was made with, and a file replaced on disk gets a new one.

Hashing a multi-gigabyte file takes seconds, so the digest of the whole content is
computed once and remembered in a small cache keyed by (path, size, mtime, inode,
ctime): a file replaced by a rename has a new inode, one rewritten in place a new mtime,
and even a copy that restores the old mtime (``cp -p``) changes the ctime, which no
program can set back. Any of them means hashing again.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from sessions import paths

_CHUNK = 8 * 1024 * 1024
_lock = threading.Lock()


def _cache_file() -> Path:
    return paths.cache_dir() / "fingerprints.json"


def _stat_key(path: Path) -> str:
    st = path.stat()
    return f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{st.st_ino}|{st.st_ctime_ns}"


def _hash_file(path: Path) -> str:
    digest = hashlib.blake2b(digest_size=20)
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def model_fingerprint(path: Path) -> str:
    """Digest of the model file's bytes (remembered while the file is unchanged)."""
    path = Path(path)
    key = _stat_key(path)
    with _lock:
        cache: dict[str, str] = {}
        try:
            cache = json.loads(_cache_file().read_text())
        except (OSError, ValueError):
            cache = {}
        if isinstance(cache, dict) and isinstance(cache.get(key), str):
            return cache[key]
        value = _hash_file(path)
        if _stat_key(path) != key:  # changed while we read it: do not remember
            return value
        cache = {k: v for k, v in cache.items() if isinstance(v, str)} if isinstance(cache, dict) else {}
        cache[key] = value
        try:
            paths.ensure_private_dir(_cache_file().parent)
            tmp = _cache_file().with_suffix(".tmp")
            tmp.write_text(json.dumps(cache))
            os.replace(tmp, _cache_file())
        except OSError:
            pass  # a cache is an optimisation; never fail a load over it
        return value
