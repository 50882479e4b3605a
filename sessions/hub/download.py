"""One file of a repository fetched into the Hugging Face cache, and nowhere else.

huggingface_hub's ``hf_hub_download`` cannot be made safe from outside: it names the
blob after the ``ETag`` of a server's answer (an absolute path or ``../`` is joined as
it came) and writes it before any caller sees the name. So llamachat asks the Hub for
the file's metadata through huggingface_hub (``get_hf_file_metadata``: its token,
headers and redirects), checks every name in the answer (``sessions.hub.names``), and
writes the cache itself, in huggingface_hub's layout (``sessions.hub.cache_layout``),
from its own download loop (``sessions.hub.transfer``). After the file is placed, the
snapshot's name must lead to the blob inside the cache.

A download stopped by the user (Ctrl+C, SIGTERM, Escape in the app) deletes its partial
file; one the network broke keeps it, and the next try goes on from it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from sessions.hub.cache_layout import RepoCache, free_space
from sessions.hub.errors import DownloadStopped, HubError
from sessions.hub.names import check_commit, check_etag, check_file_name, check_redirect
from sessions.hub.progress import DownloadProgress, ProgressCallback
from sessions.hub.transfer import Transfer
from sessions.units import human_size

BRANCH = "main"
"""The revision fetched, as llama.cpp's ``-hf``."""
PARTIAL_SUFFIX = ".incomplete"


class FileDownload:
    """``name`` of ``repo`` from the Hub at ``where`` into the cache at ``root``."""

    def __init__(self, hub: Any, repo: str, name: str, *, root: Path, endpoint: str | None,
                 progress: ProgressCallback | None = None, part: int = 1, parts: int = 1) -> None:
        self.hub = hub
        self.repo = repo
        self.name = check_file_name(name, repo)
        self.cache = RepoCache(root, repo)
        self.endpoint = endpoint
        self.where = endpoint or hub.constants.ENDPOINT
        self.progress = progress
        self.part, self.parts = part, parts
        self._size: int | None = None
        self._started = 0.0
        self._began: int | None = None
        """Bytes the partial file held when this run began (a resumed download)."""

    def fetch(self, unreachable: Any) -> Path:
        """The snapshot's path of the file, fetched or already there. ``unreachable(error)``
        tells an error of the network, when the cached copy is used instead."""
        url = self.hub.hf_hub_url(self.repo, self.name, revision=BRANCH, endpoint=self.endpoint)
        try:
            meta = self.hub.get_hf_file_metadata(url, timeout=_etag_timeout(), endpoint=self.endpoint)
        except Exception as error:
            cached = self.cache.cached_pointer(self.name, BRANCH) if unreachable(error) else None
            if cached is None:
                raise
            return cached
        etag = check_etag(meta.etag, self.name, self.where)
        commit = check_commit(meta.commit_hash, self.repo, self.where)
        location = check_redirect(url, meta.location or url, self.name, self.where)
        size = meta.size if isinstance(meta.size, int) and meta.size >= 0 else None
        blob, pointer = self.cache.blob(etag), self.cache.pointer(commit, self.name)
        if not (self.cache.points_at(pointer, blob) and self.cache.usable_blob(blob, size)):
            with self.hub.utils.WeakFileLock(self.cache.lock_file(etag)):
                if not self.cache.usable_blob(blob, size):
                    self._download(location, url, etag, size, blob)
                self.cache.link(pointer, blob)
        self.cache.write_ref(BRANCH, commit)
        if not (self.cache.inside(pointer) and self.cache.points_at(pointer, blob)):
            raise HubError(f"{pointer} does not lead to its file inside the Hugging Face cache: refused")
        return pointer

    def _download(self, location: str, url: str, etag: str, size: int | None, blob: Path) -> None:
        partial = blob.with_name(etag + PARTIAL_SUFFIX)
        self._size = size
        self._check_room(partial, size)
        transfer = Transfer(self.hub, location, url, self.name, self.where, size, etag,
                            dict(self.hub.utils.build_hf_headers()), partial, self._report)
        try:
            transfer.run()
            os.replace(partial, blob)
        except (KeyboardInterrupt, DownloadStopped):  # Ctrl+C, SIGTERM or SIGHUP (a StopSignal), Escape
            partial.unlink(missing_ok=True)
            raise
        except OSError as error:  # the disk: full, read-only (the network's errors are not OSErrors)
            raise HubError(f"{self.name} could not be written in the Hugging Face cache ({self.cache.root}): "
                           f"{error.strerror or error}; the bytes fetched are kept") from error

    def _check_room(self, partial: Path, size: int | None) -> None:
        """Refuse at once a file larger than the free space, before a byte is written."""
        if size is None:
            return
        try:
            have = partial.stat().st_size if partial.is_file() else 0
        except OSError:
            have = 0
        free = free_space(partial.parent)
        if free is not None and size - have > free:
            raise HubError(f"{self.name} is {human_size(size)}, more than the {human_size(free)} free in the "
                           f"Hugging Face cache ({self.cache.root}): nothing was fetched")

    def _report(self, done: int, finished: bool) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        if self._began is None:
            self._began, self._started = done, now
        elapsed = now - self._started
        rate = max(done - self._began, 0) / elapsed if elapsed > 0 else 0.0
        self.progress(DownloadProgress(self.name, done, self._size, rate, self.part, self.parts, finished))


def _etag_timeout() -> float:
    """Seconds the metadata request waits: ``HF_HUB_ETAG_TIMEOUT`` (as huggingface_hub), else 10."""
    try:
        return max(float(os.environ.get("HF_HUB_ETAG_TIMEOUT", "")), 0.1)
    except ValueError:
        return 10.0
