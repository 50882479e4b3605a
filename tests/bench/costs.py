"""The engine's own costs, apart from llama_decode: critical path, restore speed, disk, identity.

Each function returns one JSON-ready dict. Budgets (from the project's performance goals):
- the work outside llama_decode on the way to the first token costs at most 2 ms per
  1,000 prompt tokens (``critical_path``);
- reopening a branch from disk restores at least 2 GB/s of its whole state, or within 3x
  of a plain read plus memcpy of the same bytes, reading at most 1.5x that state
  (``restore_speed``);
- a tree's cells checkpoints take at most 1.5x the attention cells of its unique tokens
  in the layers that keep every token, plus snapshots at a bounded spacing (``disk_use``;
  the whole against the KV of every layer: ``kv_bytes``);
- identifying a model file and reading its header take at most 50 ms each (``identity``),
  a header with a 262,144-token vocabulary included (``big_vocabulary_headers``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

BUDGET_CRITICAL_MS_PER_1000 = 2.0
BUDGET_RESTORE_GBPS = 2.0
BUDGET_RESTORE_VS_MEMCPY = 3.0
BUDGET_BYTES_READ_VS_STATE = 1.5
BUDGET_CELLS_VS_KV = 1.5
BUDGET_IDENTITY_MS = 50.0


def critical_path(result, deferred_seconds: float) -> dict:
    """A prefill's time outside llama_decode, per 1,000 tokens, and what waited until after.

    Wall time (what the user waits for) and this thread's CPU time (the same work, without
    what other programs on a busy machine add to the wall time).
    """
    tokens = max(result.tokens_evaluated, 1)
    return {
        "tokens": result.tokens_evaluated,
        "prefill_seconds": round(result.seconds, 4),
        "decode_seconds": round(result.decode_seconds, 4),
        "critical_ms_per_1000_tokens": round(result.overhead_seconds / tokens * 1e6, 3),
        "critical_cpu_ms_per_1000_tokens": round(result.overhead_cpu_seconds / tokens * 1e6, 3),
        "budget_critical_ms_per_1000_tokens": BUDGET_CRITICAL_MS_PER_1000,
        "deferred_ms_per_1000_tokens": round(deferred_seconds / tokens * 1e6, 3),
    }


def _checkpoint_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.suffix in (".ckpt", ".snap")]


def memcpy_reference(paths: list[Path], repeats: int = 3) -> tuple[float, int]:
    """Seconds to read ``paths`` into memory and copy every byte once more; and the bytes.

    The best of ``repeats``: a single run's time swings with where the allocator finds
    memory (new pages cost a fault each), and the restore is held to the fastest.
    """
    best, total = float("inf"), 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        total = 0
        for path in paths:
            with open(path, "rb", buffering=0) as src:
                size = os.fstat(src.fileno()).st_size
                buf = np.empty(size, dtype=np.uint8)
                src.readinto(memoryview(buf))
                out = np.empty_like(buf)
                np.copyto(out, buf)
                total += size
        best = min(best, time.perf_counter() - t0)
    return best, total


def cold_memcpy_reference(paths: list[Path], repeats: int = 3) -> float:
    """``memcpy_reference`` as a reopen finds the machine: CPU caches emptied first.

    ``memcpy_reference`` runs right after the restore, which leaves the files' bytes in the
    CPU cache, into memory the allocator hands back warm; a reopen meets neither (the
    model load streamed gigabytes past the cache). Here every run first streams twice
    the last-level cache through other memory, and reads into buffers touched
    beforehand, as the restore's own are (``RestoreMemory``). The best of ``repeats``.
    """
    sizes = [p.stat().st_size for p in paths]
    total = sum(sizes)
    src, dst = np.ones(total, dtype=np.uint8), np.ones(total, dtype=np.uint8)
    flush = np.ones(2 * _last_level_cache_bytes(), dtype=np.uint8)
    best = float("inf")
    for _ in range(repeats):
        flush += 1
        t0 = time.perf_counter()
        at = 0
        for path, size in zip(paths, sizes, strict=True):
            fd = os.open(path, os.O_RDONLY)
            try:
                os.preadv(fd, [src[at : at + size].data], 0)
            finally:
                os.close(fd)
            np.copyto(dst[at : at + size], src[at : at + size])
            at += size
        best = min(best, time.perf_counter() - t0)
    return best


def _last_level_cache_bytes() -> int:
    """The largest CPU cache, from sysfs (64 MB where it cannot be read)."""
    sizes = []
    for entry in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = entry.read_text().strip().upper()
        scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
        try:
            sizes.append(int(text.rstrip("KM")) * scale)
        except ValueError:
            continue
    return max(sizes, default=64 << 20)


def restore_speed(result, whole_state: int, files: list[Path]) -> dict:
    """A restore from disk against the same bytes read and copied plainly (hot and cold)."""
    reference, reference_bytes = memcpy_reference(files)
    cold = cold_memcpy_reference(files)
    seconds = max(result.seconds, 1e-9)
    return {
        "tokens_restored": result.tokens_restored,
        "tokens_evaluated": result.tokens_evaluated,
        "restore_seconds": round(seconds, 5),
        "whole_state_bytes": whole_state,
        "restore_gb_per_second": round(whole_state / seconds / 1e9, 3),
        "budget_restore_gb_per_second": BUDGET_RESTORE_GBPS,
        "bytes_read": result.bytes_restored,
        "bytes_read_vs_whole_state": round(result.bytes_restored / max(whole_state, 1), 3),
        "budget_bytes_read_vs_whole_state": BUDGET_BYTES_READ_VS_STATE,
        "read_plus_memcpy_seconds": round(reference, 5),
        "read_plus_memcpy_bytes": reference_bytes,
        "restore_vs_read_plus_memcpy": round(seconds / max(reference, 1e-9), 2),
        "budget_restore_vs_read_plus_memcpy": BUDGET_RESTORE_VS_MEMCPY,
        "read_plus_memcpy_cold_seconds": round(cold, 5),
        "restore_vs_read_plus_memcpy_cold": round(seconds / max(cold, 1e-9), 2),
    }


def disk_use(root: Path, unique_tokens: int, sum_of_branch_tokens: int, branches: int,
             whole_state: int, live_tokens: int, cells_per_token: float) -> dict:
    """Checkpoint bytes on disk, by kind; the cells against those of the unique tokens in
    the layers that keep every token (``cells_per_token``: ``kv_bytes.KvBytes``)."""
    files = _checkpoint_files(root)
    cells = [p for p in files if p.suffix == ".ckpt"]
    snaps = [p for p in files if p.suffix == ".snap"]
    cells_bytes = sum(p.stat().st_size for p in cells)
    snap_bytes = sum(p.stat().st_size for p in snaps)
    kv_unique = unique_tokens * cells_per_token
    return {
        "unique_tokens": unique_tokens,
        "branches": branches,
        "sum_of_branch_tokens": sum_of_branch_tokens,
        "cells_kv_of_unique_tokens_bytes": int(kv_unique),
        "cells_files": len(cells),
        "cells_bytes": cells_bytes,
        "cells_vs_kv_of_unique_tokens": round(cells_bytes / kv_unique, 3) if kv_unique else None,
        "budget_cells_vs_kv_of_unique_tokens": BUDGET_CELLS_VS_KV,
        "snapshot_files": len(snaps),
        "snapshot_bytes": snap_bytes,
        "snapshot_spacing_tokens": round(unique_tokens / max(len(snaps), 1), 1),
        "disk_bytes": cells_bytes + snap_bytes,
        "disk_bytes_per_1000_unique_tokens": int((cells_bytes + snap_bytes) / max(unique_tokens, 1) * 1000),
        "whole_state_bytes_of_live_branch": whole_state,
        "one_whole_state_per_branch_bytes": int(whole_state / max(live_tokens, 1) * sum_of_branch_tokens),
    }


def _best_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return round(min(times) * 1e3, 2)


def identity(path: Path, repeats: int = 5) -> dict:
    """Fingerprint and header-reading times for a model file (best of ``repeats``)."""
    from sessions.discovery import read_model_card
    from sessions.llama.fingerprint import model_fingerprint

    return {
        "model_file_bytes": path.stat().st_size,
        "fingerprint_ms": _best_ms(lambda: model_fingerprint(path), repeats),
        "header_read_ms": _best_ms(lambda: read_model_card(path), repeats),
        "budget_ms": BUDGET_IDENTITY_MS,
    }


def big_vocabulary_headers(vocabulary: int = 262_144, repeats: int = 7) -> dict:
    """Reading the header of a model with a Gemma-3-sized vocabulary, without and with as
    many merges (the worst case: twice the strings to step over)."""
    from sessions.discovery import read_model_card
    from tests.gguf_support import cached_vocabulary_file

    plain = cached_vocabulary_file(vocabulary, merges=False)
    merges = cached_vocabulary_file(vocabulary, merges=True)
    assert read_model_card(plain).error is None and read_model_card(merges).error is None
    return {
        "vocabulary": vocabulary,
        "header_read_ms": _best_ms(lambda: read_model_card(plain), repeats),
        "header_read_with_merges_ms": _best_ms(lambda: read_model_card(merges), repeats),
        "budget_ms": BUDGET_IDENTITY_MS,
    }
