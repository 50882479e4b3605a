"""The disk tier: checkpoint files that survive a restart, under a byte budget.

Files are content-addressed (``keys.address``), written atomically by one background
thread (``sessions.durable``: a crash leaves at most a temp file, which a later start
removes), and never trusted: every read checks the whole header against the request and
the payload against its checksum, and a file that fails is deleted and reported in plain words
(its tokens are simply recomputed). The index of what is on disk lives in memory, built
once from the headers alone, so ``has`` and planning never touch the disk.

Several processes (the app, ``ask`` commands, a server) may write into one folder, and
the budget holds over all of them: each write takes the folder's budget lock
(``budget_lock``), and under it the folder's real total decides; when the write would
pass the budget, the index first learns what the others wrote and deleted
(``_sync_with_folder``), and the eviction after the write chooses among every file. So N
writers end within the budget, not N times it.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

import numpy as np

from ..bounded_read import open_regular
from ..durable import TEMP_SUFFIX, is_stale_temp, write_atomically
from ..paths import ensure_private_dir
from ..units import human_size, sizes_apart
from .budget_lock import budget_lock
from .disk_index import DiskEntry, DiskIndex
from .errors import CorruptCheckpointError
from .file_format import (
    HEADER_SIZE,
    Header,
    build_segment,
    check_header,
    check_payload,
    check_placed,
    encode_header,
    expected_address,
    parse_header,
)
from .file_reads import Place, Placed, StateSpan, mark_used, read_in_one, read_payload, read_pieces
from .keys import (
    Key,
    Kind,
    ParsedAddress,
    StateCompat,
    address,
    address_text,
    is_model_folder,
    key_of,
    parse_address,
)
from .listing import read_header
from .segment import Segment, as_view
from .use_clock import UseClock

log = logging.getLogger(__name__)
_DISK_FULL = {errno.ENOSPC, errno.EDQUOT}
T = TypeVar("T")


class DiskTier:
    """Checkpoint files under one folder, their in-memory index, and their budget."""

    def __init__(
        self,
        directory: Path,
        budget: int,
        report: Callable[[str], None],
        is_active: Callable[[Key], bool],
    ) -> None:
        self.directory = Path(directory)
        self._root = str(self.directory)
        self.budget = max(0, int(budget))
        self._report = report
        self._is_active = is_active
        self._lock = threading.Lock()
        self._build_lock = threading.Lock()
        self._index: DiskIndex | None = None
        self._clock = UseClock()
        self._leaving: set[Key] = set()
        """Keys the index no longer lists whose files are still being deleted."""
        self._disabled = False
        self._writes_failing = False
        self._told_too_large = False
        self._told_full = False
        self.writes = 0
        self.skipped = 0
        self.evictions = 0
        self.corrupt_deleted = 0
        self.write_errors = 0

    # ----- index -------------------------------------------------------------------------

    def ensure_index(self) -> None:
        """Build the index from the file headers (once), cleaning crashed temp files."""
        if self._index is not None:
            return
        with self._build_lock:
            if self._index is not None:
                return
            index = DiskIndex()
            try:
                ensure_private_dir(self.directory)
                self._scan_into(index)
            except OSError as error:
                self._disabled = True
                index = DiskIndex()  # list nothing: plans would count on files every read refuses
                self._report(
                    f"the checkpoint folder {self.directory} cannot be used ({error.strerror or error}); "
                    "checkpoints are kept in memory only"
                )
            # Evict before publishing: once ``_index`` is set, callers skip the build lock.
            victims = index.pop_victims(self.budget, self._is_active)
            self._delete_evicted(victims)
            with self._lock:
                self.evictions += len(victims)
                self._index = index

    def _scan_into(self, index: DiskIndex) -> None:
        now = time.time()
        found: list[tuple[Key, DiskEntry]] = []
        for folder in self.directory.iterdir():
            if not is_model_folder(folder.name) or not folder.is_dir():
                continue
            for path in folder.iterdir():
                if path.name.endswith(TEMP_SUFFIX):
                    if is_stale_temp(path, now):
                        path.unlink(missing_ok=True)
                    continue
                parsed = parse_address(folder.name, path.name)
                if parsed is None:
                    continue
                try:
                    header, size, mtime = read_header(path)
                    check_header(header, parsed, size)
                except FileNotFoundError:
                    continue
                except CorruptCheckpointError as error:
                    self._delete_corrupt(path, error.reason)
                    continue
                except OSError as error:
                    self._report(f"checkpoint {path.name} could not be read ({error.strerror}); skipped")
                    continue
                found.append((parsed.key, DiskEntry.of_header(header, path, size, (mtime, mtime))))
        self._clock.seed(entry for _key, entry in found)
        index.add_all(found)

    def known(self, key: Key) -> bool:
        """True when the index is built and lists ``key`` (never does I/O)."""
        index = self._index
        with self._lock:
            return index is not None and key in index

    def contains(self, key: Key) -> bool:
        self.ensure_index()
        return self.known(key)

    def touch(self, key: Key) -> None:
        """Mark a use that happened elsewhere (a RAM hit), in memory only."""
        with self._lock:
            if self._index is not None:
                self._index.touch(key, self._clock.now())

    def describe(self, key: Key) -> DiskEntry | None:
        """The index entry for ``key`` (builds the index on first use), not a copy: a plan
        asks for dozens. Read it, never change it; only its ``last_use`` changes later
        (under the tier's lock), and nothing that reads an entry from here uses that."""
        self.ensure_index()
        with self._lock:
            return self._index.get(key) if self._index is not None else None

    def totals(self) -> tuple[int, int]:
        """(bytes, files) on disk as the index knows them; (0, 0) before it is built."""
        with self._lock:
            if self._index is None:
                return (0, 0)
            return (self._index.total_bytes, len(self._index))

    # ----- writing (writer thread) ------------------------------------------------------

    def save(self, segment: Segment) -> None:
        """Write ``segment`` unless it is on disk already (in the same role: a prompt end
        that was the tip is written again, or a later process takes it for the tip);
        evict to stay under budget."""
        self.ensure_index()
        key = segment.key
        with self._lock:
            entry = self._index.get(key) if self._index is not None else None
            if self._disabled or (entry is not None and entry.role == segment.role):
                self.skipped += 1
                return
        size = HEADER_SIZE + segment.nbytes
        if size > self.budget:
            self._tell_too_large(size)
            return
        rel = address(segment.compat, segment.prefix, segment.kind)
        path = self.directory / rel
        chunks = [memoryview(encode_header(segment)), as_view(segment.state)]
        if segment.logits is not None:
            chunks.append(as_view(segment.logits))
        with budget_lock(self.directory):
            self._write_within_budget(key, segment, path, chunks, size)

    def _write_within_budget(self, key: Key, segment: Segment, path: Path, chunks, size: int) -> None:
        """Under the budget lock: write the file, then evict until the folder fits the
        budget again (the new file is a candidate like any other), having first learnt
        the files of the other processes when the folder would pass it."""
        if self._folder_bytes() + size > self.budget:
            self._sync_with_folder()
        error = self._write(path, chunks)
        if error is not None and error.errno in _DISK_FULL and self._make_room(size):
            error = self._write(path, chunks)  # our own oldest checkpoints made room: try again
        if error is not None:
            self.write_errors += 1
            if not self._writes_failing:
                full = error.errno in _DISK_FULL
                self._report(
                    f"checkpoint {path.name} could not be written ({error.strerror or error})"
                    + ("; no checkpoint of ours was left to delete for room" if full else "")
                    + "; checkpoints stay in memory only until writing works again"
                )
            self._writes_failing = True
            return
        self._writes_failing = False
        with self._lock:
            assert self._index is not None
            self._index.add(key, DiskEntry.of_segment(segment, path, size, self._clock.now()))
            self.writes += 1
            victims = self._pop_victims(self.budget)
        self._delete_evicted(victims)

    def _folder_bytes(self) -> int:
        """What the folder's checkpoint files take now (one stat per file)."""
        total = 0
        try:
            for folder in os.scandir(self.directory):
                if is_model_folder(folder.name) and folder.is_dir(follow_symlinks=False):
                    for entry in os.scandir(folder.path):
                        if parse_address(folder.name, entry.name) is not None:
                            try:
                                total += entry.stat(follow_symlinks=False).st_size
                            except FileNotFoundError:
                                continue
        except OSError:
            return 0  # a folder that cannot be listed: the index's own count stands
        return total

    def _sync_with_folder(self) -> None:
        """List the files other processes wrote, and drop those they deleted, so that
        eviction chooses among every file of the folder."""
        found: dict[Key, tuple[Path, ParsedAddress]] = {}
        try:
            for folder in os.scandir(self.directory):
                if is_model_folder(folder.name) and folder.is_dir(follow_symlinks=False):
                    for entry in os.scandir(folder.path):
                        parsed = parse_address(folder.name, entry.name)
                        if parsed is not None:
                            found[parsed.key] = (Path(entry.path), parsed)
        except OSError:
            return
        with self._lock:
            assert self._index is not None
            gone = [key for key in self._index if key not in found and key not in self._leaving]
            for key in gone:
                self._index.remove(key)
            new = [(key, *found[key]) for key in found if key not in self._index]
        for key, path, parsed in new:
            try:
                header, size, mtime = read_header(path)
                check_header(header, parsed, size)
            except (OSError, CorruptCheckpointError):
                continue  # deleted meanwhile, or not whole: the reader that meets it decides
            with self._lock:
                if key not in self._index:
                    self._index.add(key, DiskEntry.of_header(header, path, size, (mtime, mtime)))

    def _write(self, path: Path, chunks) -> OSError | None:
        try:
            ensure_private_dir(path.parent)
            # No fsync: every read checks the whole file (a power cut costs a recompute).
            write_atomically(path, chunks, crash_label="checkpoint", sync=False)
        except OSError as error:
            return error
        return None

    def _make_room(self, size: int) -> bool:
        """The disk is full: delete our own least useful files (abandoned leaves first) to
        free twice ``size``. False when nothing was left to delete."""
        with self._lock:
            assert self._index is not None
            victims = self._pop_victims(max(0, self._index.total_bytes - 2 * size))
        self._delete_evicted(victims)
        if victims and not self._told_full:
            self._told_full = True
            freed = sum(entry.size for _key, entry in victims)
            self._report(
                f"the checkpoint disk is full: {len(victims)} older checkpoints "
                f"({human_size(freed)}) were deleted to make room"
            )
        return bool(victims)

    def _pop_victims(self, budget: int) -> list[tuple[Key, DiskEntry]]:
        """Take entries off the index until it fits ``budget`` (under the lock); their
        files are then deleted with ``_delete_evicted``."""
        victims = self._index.pop_victims(budget, self._is_active)  # type: ignore[union-attr]
        self.evictions += len(victims)
        self._leaving.update(key for key, _entry in victims)
        return victims

    def _tell_too_large(self, size: int) -> None:
        if not self._told_too_large:
            self._told_too_large = True
            shown, budget = sizes_apart(size, self.budget)
            self._report(
                f"a checkpoint of {shown} is larger than the disk budget of {budget} "
                "(checkpoints.max_disk); checkpoints that large stay in memory only"
            )

    def remove(self, key: Key) -> None:
        """Delete the file of ``key`` if there is one (writer thread)."""
        self.ensure_index()
        with self._lock:
            entry = self._index.remove(key) if self._index is not None else None
            if entry is not None:
                self._leaving.add(key)
        if entry is not None:
            self._delete_evicted([(key, entry)])

    def forget(self, keys: Iterable[Key]) -> None:
        """Unlist files deleted by someone else (a deleted chat's, ``llamachat cache``)."""
        self.ensure_index()
        with self._lock:
            if self._index is not None:
                for key in keys:
                    self._index.remove(key)

    def _delete_evicted(self, victims: list[tuple[Key, DiskEntry]]) -> None:
        for key, entry in victims:
            try:
                entry.path.unlink(missing_ok=True)
            except OSError as error:
                log.warning("could not delete evicted checkpoint %s: %s", entry.path, error)
            with self._lock:
                self._leaving.discard(key)

    # ----- reading ----------------------------------------------------------------------

    def load(self, compat: StateCompat, prefix: str, kind: Kind = "cells", *, use: bool = True) -> Segment | None:
        """The verified segment on disk, or None (missing or deleted as corrupt); ``use``:
        count the read as a use of the file (eviction takes the least recently used)."""

        def read(src, header: Header) -> Segment:
            state = read_payload(src, header.state_len)
            logits = read_payload(src, header.logits_len)
            return build_segment(compat, header, state, logits)

        return self._read_checked(compat, prefix, kind, read, use)

    def load_into(self, compat: StateCompat, prefix: str, kind: Kind, place: Place) -> Placed | None:
        """Read a file's state straight into the buffers ``place`` gives for it.

        For restores: the bytes land where llama.cpp will read them, in memory the caller
        keeps ready, with one scatter read and no copy. Nothing enters the RAM tier (the
        page cache already holds the file). ``place`` gets what the file holds and a
        reader of the state at an offset (to learn a layout), and returns the pieces,
        in file order, that together take exactly ``state_len`` bytes; or None to
        decline the file (it is then read and checked all the same, so that a damaged
        file is not taken for one of another layout). The checksum is taken over the
        pieces: None comes back for a declined, missing or corrupt file (a corrupt one is
        deleted and reported).

        A file the index describes is first read in one go (``read_in_one``); anything
        unexpected there is left to the checked read below, which reports it.
        """
        self.ensure_index()
        key = key_of(compat, prefix, kind)
        with self._lock:
            entry = self._index.get(key) if self._index is not None and not self._disabled else None
        if entry is not None:
            span = StateSpan(entry.start, entry.end, entry.state_len)
            placed = read_in_one(str(entry.path), expected_address(compat, prefix, kind), span, entry.size, place)
            if placed is not None:
                with self._lock:
                    self._index.touch(key, self._clock.now())  # type: ignore[union-attr]
                return placed

        def read(src, header: Header) -> Placed | None:
            fd = src.fileno()

            def read_at(offset: int, size: int) -> bytes:
                return os.pread(fd, size, HEADER_SIZE + offset)

            pieces = place(StateSpan(header.start, header.end, header.state_len), read_at)
            if pieces is None:  # declined: still tell a damaged file from one of another layout
                check_payload(header, read_payload(src, header.state_len), read_payload(src, header.logits_len))
                return None
            if sum(len(piece) for piece in pieces) != header.state_len:
                raise ValueError("the pieces to read into do not add up to the state")
            done = read_pieces(fd, pieces, HEADER_SIZE)
            logits = np.empty(header.logits_len, dtype=np.uint8)
            done_logits = os.preadv(fd, [logits.data], HEADER_SIZE + header.state_len) if len(logits) else 0
            check_placed(header, pieces, done, logits[:done_logits])
            return Placed(header.start, header.end, header.state_len + header.logits_len,
                          logits if header.has_logits else None)

        return self._read_checked(compat, prefix, kind, read)

    def _read_checked(self, compat: StateCompat, prefix: str, kind: Kind, read: Callable[..., T | None],
                      use: bool = True) -> T | None:
        """Open the file of a checkpoint, check its header, and ``read(src, header)`` it.

        Whatever goes wrong is handled here, once for every way of reading: a missing
        file leaves the index, a corrupt one is deleted and reported, an unreadable one
        is reported; each gives None, and its tokens are recomputed.
        """
        self.ensure_index()
        if self._disabled:
            return None
        key = key_of(compat, prefix, kind)
        path = os.path.join(self._root, address_text(compat, prefix, kind))
        with self._lock:  # to tell a file written by another process from one being deleted
            removals, leaving = self._index.removals, key in self._leaving  # type: ignore[union-attr]
            listed = self._index.get(key)  # type: ignore[union-attr]
        try:
            with os.fdopen(open_regular(path), "rb", buffering=0) as src:
                size = os.fstat(src.fileno()).st_size
                header = parse_header(src.read(HEADER_SIZE))
                check_header(header, expected_address(compat, prefix, kind), size)
                result = read(src, header)
                if result is not None and use:
                    mark_used(src.fileno())
        except FileNotFoundError:
            self._unlist_if_unchanged(key, listed)
            return None
        except CorruptCheckpointError as error:
            self._unlist_if_unchanged(key, listed)
            self._delete_corrupt(Path(path), error.reason)
            return None
        except OSError as error:
            self._report(f"checkpoint {os.path.basename(path)} could not be read ({error.strerror}); "
                         "its tokens will be recomputed")
            return None
        if result is None:
            return None
        with self._lock:
            assert self._index is not None
            now = self._clock.now()
            if key in self._index:
                if use:
                    self._index.touch(key, now)
            elif self._index.removals == removals and not leaving:  # written by another process
                self._index.add(key, DiskEntry.of_header(header, Path(path), size, now))
            # (else it may have been deleted while this read had it open; another's is listed next read)
        return result

    def _unlist_if_unchanged(self, key: Key, listed: DiskEntry | None) -> None:
        """Take ``key`` off the index after a read that did not find its file whole, unless
        the writer listed a new file under it since the read began (the read looked before
        the file was renamed into place): that file is whole, and stays listed."""
        with self._lock:
            if self._index is not None and self._index.get(key) is listed:
                self._index.remove(key)

    def entries(self) -> list[tuple[Key, DiskEntry]]:
        """The files listed now, with what the index knows of them (none while disabled)."""
        self.ensure_index()
        with self._lock:
            return [] if self._index is None or self._disabled else self._index.items()

    def _delete_corrupt(self, path: Path, reason: str) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as error:
            self._report(f"checkpoint {path.name} was corrupt ({reason}) and could not be "
                         f"deleted ({error.strerror}); it will be ignored")
            return
        with self._lock:
            self.corrupt_deleted += 1
        self._report(f"checkpoint {path.name} was corrupt ({reason}) and was deleted; "
                     "its tokens will be recomputed")
