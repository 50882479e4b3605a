"""The Hugging Face cache's layout, written so that nothing lands outside the cache.

A repository's files live under ``models--USER--REPO``: the bytes in ``blobs/<content
hash>``, the names in ``snapshots/<commit>/<file>`` (a relative link to the blob), the
commit a branch names in ``refs/<branch>``; locks in ``.locks/models--USER--REPO``. That
is huggingface_hub's layout, so every tool that uses the cache finds what llamachat
fetched, and the other way round.

Every folder is made one level at a time, and each must still resolve inside the cache
before the next is made in it: a link planted in the cache (``blobs`` pointing at the
home folder, say) is refused before anything is created through it. Files are written
under names checked by ``sessions.hub.names``, and a finished file is placed by a rename.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sessions.bounded_read import NotRegularFile, read_regular_file
from sessions.durable import write_atomically
from sessions.hub.errors import HubError
from sessions.hub.names import check_commit, safe_file_name

REF_LIMIT = 256
"""Bytes of a ``refs`` file read: a commit hash and a newline."""


class RepoCache:
    """One repository's part of the cache at ``root``."""

    def __init__(self, root: Path, repo: str) -> None:
        self.root = root
        self.repo = repo
        self.name = "models--" + repo.replace("/", "--")

    @property
    def storage(self) -> Path:
        return self.root / self.name

    def real_root(self) -> str:
        return os.path.realpath(self.root)

    def inside(self, path: Path | str) -> bool:
        """Whether ``path``, links resolved, is in the cache (or is the cache)."""
        real, root = os.path.realpath(path), self.real_root()
        return real == root or real.startswith(root.rstrip(os.sep) + os.sep)

    def folder(self, *parts: str) -> Path:
        """``root/parts...``, made where missing; ``HubError`` when a level is a link or
        anything else that leads out of the cache, or is not a folder."""
        os.makedirs(self.root, exist_ok=True)
        path = self.root
        for part in parts:
            path = path / part
            try:
                os.mkdir(path)
            except FileExistsError:
                pass
            if not self.inside(path):
                raise HubError(f"{path} leads outside the Hugging Face cache (to {os.path.realpath(path)}): "
                               "refused; remove it and fetch again")
            if not path.is_dir():
                raise HubError(f"{path} in the Hugging Face cache is not a folder: remove it and fetch again")
        return path

    def blob(self, etag: str) -> Path:
        return self.folder(self.name, "blobs") / etag

    def lock_file(self, etag: str) -> Path:
        """The lock huggingface_hub takes for the same blob; a link there is removed, so
        taking the lock (which truncates the file) never reaches through it."""
        path = self.folder(".locks", self.name) / f"{etag}.lock"
        if path.is_symlink():
            path.unlink()
        return path

    def pointer(self, commit: str, file: str) -> Path:
        """The snapshot's name for ``file`` at ``commit`` (its folders made)."""
        *folders, leaf = file.split("/")
        return self.folder(self.name, "snapshots", commit, *folders) / leaf

    def usable_blob(self, blob: Path, size: int | None) -> bool:
        """A finished blob already there: a regular file in the cache, of ``size`` bytes
        when known (huggingface_hub may have placed it, as a link into its shared store)."""
        try:
            info = os.stat(blob)
        except OSError:
            return False
        if blob.is_symlink() and not self.inside(blob):
            return False
        return stat.S_ISREG(info.st_mode) and (size is None or info.st_size == size)

    def points_at(self, pointer: Path, blob: Path) -> bool:
        """Whether the snapshot's ``pointer`` already leads to ``blob``."""
        try:
            return os.path.samefile(pointer, blob) and self.inside(pointer)
        except OSError:
            return False

    def link(self, pointer: Path, blob: Path) -> None:
        """Make ``pointer`` a relative link to ``blob``, replacing whatever was there."""
        target = os.path.relpath(blob, pointer.parent)
        temp = pointer.with_name(f".{pointer.name}.{os.getpid()}.link")
        temp.unlink(missing_ok=True)
        os.symlink(target, temp)
        try:
            os.replace(temp, pointer)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        if not self.points_at(pointer, blob):
            raise HubError(f"{pointer} in the Hugging Face cache does not lead to its file: refused")

    def write_ref(self, branch: str, commit: str) -> None:
        """``refs/<branch>`` names ``commit`` (unchanged when it already does)."""
        if branch == commit or self.read_ref(branch) == commit:
            return
        write_atomically(self.folder(self.name, "refs") / branch, commit)

    def read_ref(self, branch: str) -> str | None:
        """The commit ``refs/<branch>`` names, read as a regular file of a few bytes (a
        FIFO there would block the read for ever); None when it names none."""
        path = self.storage / "refs" / branch
        try:
            if not self.inside(path):
                return None
            text = read_regular_file(path, REF_LIMIT).decode("utf-8").strip()
            return check_commit(text, self.repo, "the cache")
        except (OSError, ValueError, HubError):
            return None

    def cached_pointer(self, file: str, branch: str = "main") -> Path | None:
        """``file`` as the cache holds it for ``branch``: a snapshot's name that leads to a
        regular file in the cache; None otherwise."""
        commit = self.read_ref(branch)
        if commit is None or not safe_file_name(file):
            return None
        pointer = self.storage / "snapshots" / commit / file
        try:
            usable = self.inside(pointer) and stat.S_ISREG(os.stat(pointer).st_mode)
        except OSError:
            return None
        return pointer if usable else None

    def cached_files(self, branch: str = "main") -> list[str]:
        """The files of the snapshot ``branch`` names, those that lead to a regular file
        in the cache, by name."""
        commit = self.read_ref(branch)
        if commit is None:
            return []
        snapshot = self.storage / "snapshots" / commit
        if not self.inside(snapshot):
            return []
        found = []
        for folder, _dirs, names in os.walk(snapshot):
            for name in names:
                relative = os.path.relpath(os.path.join(folder, name), snapshot).replace(os.sep, "/")
                if self.cached_pointer(relative, branch) is not None:
                    found.append(relative)
        return sorted(found)


def open_partial(path: Path) -> int:
    """A descriptor to append to the download's partial file, made if missing; anything
    there that is not a regular file (a link, a FIFO) is removed first."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            path.unlink()
    except FileNotFoundError:
        pass
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o666)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegularFile(path)
    return fd


def free_space(folder: Path) -> int | None:
    """Bytes a user may still write in ``folder``'s file system (None: unknown)."""
    try:
        info = os.statvfs(folder)
    except (OSError, AttributeError):
        return None
    return info.f_bavail * info.f_frsize

