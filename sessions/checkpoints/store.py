"""The checkpoint store: segments in RAM and on disk, handed back verified.

The engine saves a segment at every message boundary (and every few thousand tokens in a
long message) and restores a branch from its segments root-first. The store makes that
cheap on every path: ``put`` never waits on a disk, ``get`` finds a segment in RAM, in the
writer's queue or on disk (verified, then promoted to RAM), ``read_into`` reads one from
disk straight into a restore's buffers (verified, not promoted: the page cache keeps the
file), and both tiers keep the branches the user is on for as long as their budgets allow.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from .. import paths
from .disk_tier import DiskTier
from .errors import InvalidSegmentError, StoreClosedError
from .file_format import HEADER_SIZE
from .file_reads import Place, Placed
from .keys import FILE_SUFFIX, Key, Kind, StateCompat, fingerprint_id, key_of
from .listing import CheckpointFile
from .ram_tier import RamTier, Standing
from .segment import Segment, SegmentMeta, Tier
from .writer import BackgroundWriter

log = logging.getLogger(__name__)

DEFAULT_QUEUE_ITEMS = 4096
"""A long prefill hands over a cells file and a snapshot per segment at once (thousands on
a small window): the queue's bytes, not its count, are what guard memory."""
MIN_QUEUE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class StoreStats:
    """A snapshot of the store's counters (for the status bar and the tests)."""

    ram_bytes: int
    """Payload bytes held in the RAM tier."""
    ram_count: int
    disk_bytes: int
    """File bytes on disk (headers included), as the index knows them."""
    disk_count: int
    writes: int
    """Files written by this store."""
    evictions: int
    """Files deleted from disk to stay under the disk budget."""
    corrupt_deleted: int
    """Files deleted because a check failed."""
    hits_ram: int
    """``get`` answered from RAM or from the writer's queue."""
    hits_disk: int
    misses: int
    ram_evictions: int = 0
    """Segments dropped from RAM to stay under the RAM budget."""
    dropped_writes: int = 0
    """Disk writes dropped because the writer's queue was full."""
    pending_writes: int = 0
    write_errors: int = 0
    disk_budget: int = 0
    """Most file bytes the disk tier keeps (``checkpoints.max_disk``)."""


class CheckpointStore:
    """Segments by (compat, prefix) in a RAM tier and a disk tier, safe across threads.

    ``ram_bytes`` and ``disk_bytes`` are the two budgets (payload bytes in RAM, file bytes
    on disk). ``on_problem`` receives plain-words reports (a corrupt file deleted, a disk
    that cannot be written); it is called from the writer thread as well as the caller's,
    so a UI must hand the message over to its own thread. ``queue_items`` and
    ``queue_bytes`` bound the segments waiting for the disk (default: 4,096 segments and the
    larger of ``ram_bytes`` and 256 MiB); past that the oldest waiting writes are dropped
    (all of them for a segment larger than ``queue_bytes``, which is then queued alone).
    """

    def __init__(
        self,
        directory: Path | None = None,
        *,
        ram_bytes: int,
        disk_bytes: int,
        on_problem: Callable[[str], None] | None = None,
        queue_items: int = DEFAULT_QUEUE_ITEMS,
        queue_bytes: int | None = None,
    ) -> None:
        self.directory = Path(directory) if directory is not None else paths.checkpoints_dir()
        self._on_problem = on_problem
        self._active: dict[str, frozenset[str]] = {}
        self._lock = threading.Lock()
        self._hits_ram = self._hits_disk = self._misses = 0
        self._ram = RamTier(ram_bytes, self._is_active, self._standing, self._any_dropped)
        self._disk = DiskTier(self.directory, disk_bytes, self._report, self._is_active)
        self._writer = BackgroundWriter(
            self._disk.save,
            remove=self._disk.remove,
            startup=self._disk.ensure_index,
            report=self._report,
            max_items=queue_items,
            max_bytes=queue_bytes if queue_bytes is not None else max(ram_bytes, MIN_QUEUE_BYTES),
            retry=self._write_again,
        )
        self._closed = False

    # ----- the engine's API -------------------------------------------------------------

    def put(self, segment: Segment, *, persist: bool = True) -> None:
        """Keep ``segment`` in RAM now and (with ``persist``) queue its disk write.

        Never waits on disk I/O. A segment kept in RAM only is gone once the RAM tier
        evicts it (the engine decides which snapshots are worth the disk).
        """
        if not isinstance(segment, Segment):
            raise InvalidSegmentError(f"put() takes a Segment, not {type(segment).__name__}")
        if self._closed:
            raise StoreClosedError()
        # Queued before it is kept: a write the full queue drops for it is then known as
        # dropped when the RAM tier chooses what to evict (``_standing``).
        # Until the writer has deleted a file the index lists it, yet a write must follow.
        if persist and (self._writer.deleting(segment.key) or not self._disk.known(segment.key)):
            self._writer.submit(segment)
        self._ram.put(segment)

    def _any_dropped(self) -> bool:
        return self._writer.any_dropped()

    def _standing(self, key: Key) -> Standing:
        """Where a segment of the RAM tier is besides (``RamTier``)."""
        if self._writer.is_dropped(key):
            return "alone"
        return "queued" if self._writer.queued(key) else "disk"  # (one being written is as good as there)

    def _write_again(self, keys: list[Key]) -> None:
        """Queue again the writes the full queue dropped (the writer's thread, once the queue
        has drained), those the RAM tier still holds and the disk does not."""
        for key in keys:
            segment = self._ram.peek(key)
            if segment is not None and not self._disk.known(key):
                self._writer.submit(segment, again=True)

    def drop_from_disk(self, compat: StateCompat, prefix: str, kind: Kind = "cells") -> None:
        """Delete a checkpoint's file (its RAM copy stays); never waits on disk I/O."""
        if not self._closed:
            self._writer.discard(key_of(compat, prefix, kind))

    def forget(self, files: Iterable[CheckpointFile]) -> None:
        """Take files another hand deleted off the disk index (their RAM copies stay), so
        that its total and its plans stop counting them at once."""
        self._disk.forget(file.key for file in files)

    def persisted(self, compat: StateCompat, prefix: str, kind: Kind = "cells") -> bool:
        """Whether the checkpoint is on disk or on its way there (no disk I/O)."""
        key = key_of(compat, prefix, kind)
        if self._writer.pending(key) is not None:
            return True
        return not self._writer.deleting(key) and self._disk.known(key)

    def get(self, compat: StateCompat, prefix: str, kind: Kind = "cells") -> Segment | None:
        """The segment for ``prefix``: from RAM, else the write queue, else disk (verified)."""
        segment = self._in_memory(key_of(compat, prefix, kind))
        if segment is not None:
            return segment
        segment = self._disk.load(compat, prefix, kind)
        self._count(disk=int(segment is not None), miss=int(segment is None))
        if segment is not None:
            self._ram.put(segment)
        return segment

    def read_into(self, compat: StateCompat, prefix: str, kind: Kind, place: Place) -> Segment | Placed | None:
        """Like ``get``, but a segment found only on disk is read into the buffers ``place``
        gives (see ``DiskTier.load_into``) and is not kept in RAM: the restore that asks
        copies it into llama.cpp at once, and the page cache already keeps the file."""
        segment = self._in_memory(key_of(compat, prefix, kind))
        if segment is not None:
            return segment
        placed = self._disk.load_into(compat, prefix, kind, place)
        self._count(disk=int(placed is not None), miss=int(placed is None))
        return placed

    def warm(self, compat: StateCompat, prefix: str, kind: Kind = "cells") -> int:
        """Read a checkpoint from disk into RAM ahead of a restore that may come; the
        payload bytes read (0: in RAM already, marked as just used, or not on disk).

        Not counted as a hit or a miss: nothing was restored. The RAM tier's budget
        holds as for any ``get``: past it, its LRU drops what was used least recently."""
        key = key_of(compat, prefix, kind)
        if self._ram.get(key) is not None or self._writer.pending(key) is not None:
            return 0
        segment = self._disk.load(compat, prefix, kind)
        return segment.nbytes if segment is not None and self._ram.put(segment) else 0

    def ram_room(self, compat: StateCompat, besides: Iterable[tuple[str, Kind]] = ()) -> int:
        """Bytes the RAM tier can hold without dropping a checkpoint of the branches the
        user is on (``set_active``); those listed in ``besides`` are not counted."""
        keys = frozenset(key_of(compat, prefix, kind) for prefix, kind in besides)
        return max(0, self._ram.budget - self._ram.protected_bytes(keys))

    def _in_memory(self, key: Key) -> Segment | None:
        """The segment in RAM or in the writer's queue (counted as a RAM hit), or None."""
        segment = self._ram.get(key) or self._writer.pending(key)
        if segment is not None:
            self._disk.touch(key)
            self._count(ram=1)
        return segment

    def largest(self, model_fingerprint: str, kind: Kind) -> int:
        """Payload bytes of the largest of a model's checkpoint files of ``kind`` (0 if none).

        What a restore from disk may have to hold at once, for memory prepared while
        the model loads (so by fingerprint alone: the context params are not known yet)."""
        folder, suffix = fingerprint_id(model_fingerprint).hex(), FILE_SUFFIX[kind]
        sizes = [entry.size for _key, entry in self._disk.entries()
                 if entry.path.parent.name == folder and entry.path.name.endswith(suffix)]
        return max(sizes, default=HEADER_SIZE) - HEADER_SIZE

    def sample(self, compat: StateCompat, kind: Kind, max_bytes: int) -> Segment | None:
        """The smallest of ``compat``'s files of ``kind`` on disk, read and verified; None
        when there is none of at most ``max_bytes``.

        For learning the layout of a model's states before the first restore needs it
        (``restore_reads.learn_layouts``): neither kept in RAM nor counted as a use."""
        digest = compat.digest()
        sizes = [(entry.size, key[1]) for key, entry in self._disk.entries()
                 if key[0] == digest and key[2] == kind and entry.size <= max_bytes]
        return self._disk.load(compat, min(sizes)[1], kind, use=False) if sizes else None

    def has(self, compat: StateCompat, prefix: str, kind: Kind = "cells") -> bool:
        """Whether ``get`` would likely succeed; no disk I/O once the index is built."""
        return self.where(compat, prefix, kind) is not None

    def where(self, compat: StateCompat, prefix: str, kind: Kind = "cells") -> Tier | None:
        """The tier that holds the checkpoint (the writer's queue counts as RAM), or None;
        no disk I/O once the index is built."""
        key = key_of(compat, prefix, kind)
        if key in self._ram or self._writer.pending(key) is not None:
            return "ram"
        if self._disk.contains(key):
            return "disk"
        return None

    def peek(self, compat: StateCompat, prefix: str, kind: Kind = "cells") -> SegmentMeta | None:
        """Range, parent, logits and tier of a stored segment; no payload is read."""
        key = key_of(compat, prefix, kind)
        segment = self._ram.peek(key) or self._writer.pending(key)
        if segment is not None:
            return segment.meta("ram")
        entry = self._disk.describe(key)
        if entry is None:
            return None
        return SegmentMeta(
            prefix, entry.parent, entry.start, entry.end, entry.has_logits, "disk",
            kind, entry.size - HEADER_SIZE, entry.has_state, entry.role,
        )

    def set_active(self, compat: StateCompat, prefixes: Iterable[str]) -> None:
        """Replace the set of ``compat``'s prefixes on branches the user is on.

        They are the last to be evicted from either tier. An empty iterable clears it.
        """
        active = frozenset(prefixes)
        digest = compat.digest()
        with self._lock:
            if active:
                self._active[digest] = active
            else:
                self._active.pop(digest, None)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until queued disk writes are done; False if ``timeout`` ran out first."""
        return self._writer.flush(timeout)

    def stats(self) -> StoreStats:
        disk_bytes, disk_count = self._disk.totals()
        with self._lock:
            hits_ram, hits_disk, misses = self._hits_ram, self._hits_disk, self._misses
        return StoreStats(
            ram_bytes=self._ram.nbytes,
            ram_count=len(self._ram),
            disk_bytes=disk_bytes,
            disk_count=disk_count,
            writes=self._disk.writes,
            evictions=self._disk.evictions,
            corrupt_deleted=self._disk.corrupt_deleted,
            hits_ram=hits_ram,
            hits_disk=hits_disk,
            misses=misses,
            ram_evictions=self._ram.evictions,
            dropped_writes=self._writer.dropped,
            pending_writes=self._writer.pending_count,
            write_errors=self._disk.write_errors,
            disk_budget=self._disk.budget,
        )

    def close(self) -> None:
        """Finish the queued writes and stop the writer thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._writer.close()

    def __enter__(self) -> CheckpointStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ----- internals --------------------------------------------------------------------

    def _is_active(self, key: Key) -> bool:
        active = self._active.get(key[0])
        return active is not None and key[1] in active

    def _count(self, *, ram: int = 0, disk: int = 0, miss: int = 0) -> None:
        with self._lock:
            self._hits_ram += ram
            self._hits_disk += disk
            self._misses += miss

    def report(self, message: str) -> None:
        """Tell the user, in plain words, about a checkpoint that could not be taken or used
        (through ``on_problem``; logged when there is none)."""
        self._report(message)

    def _report(self, message: str) -> None:
        if self._on_problem is None:
            log.warning("%s", message)
            return
        try:
            self._on_problem(message)
        except Exception:
            log.exception("the checkpoint problem handler failed on: %s", message)
