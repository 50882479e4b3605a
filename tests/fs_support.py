"""Small file systems for tests of full disks and read-only media.

A full disk and read-only media must be real to be tested honestly: SQLite meets them
deep inside its own I/O, where nothing can be patched. As root (CI) a tmpfs of a given
size is mounted in the test's folder and remounted read-only on demand; where mounting is
not allowed the tests that need it are skipped, except that read-only media can be
stood in for by permissions when not running as root (root ignores permissions).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


def _mount(args: list[str]) -> bool:
    try:
        done = subprocess.run(["mount", *args], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _umount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], capture_output=True, timeout=30)


class SmallDisk:
    """A folder on a 2 MiB tmpfs of its own (``mounted``), or a plain folder where that
    cannot be had."""

    def __init__(self, folder: Path, mounted: bool) -> None:
        self.folder = folder
        self.mounted = mounted

    def need_mount(self) -> None:
        if not self.mounted:
            pytest.skip("a small file system of its own needs mount (root)")

    def fill(self) -> Path:
        """Write a file until the disk is full; returns it (delete it to free the space)."""
        filler = self.folder / "filler"
        with open(filler, "ab", buffering=0) as handle:
            chunk = b"\0" * 65536
            while True:
                try:
                    handle.write(chunk)
                except OSError:
                    if len(chunk) == 1:
                        break
                    chunk = chunk[: len(chunk) // 2]
        return filler

    def fill_leaving(self, free: int) -> Path:
        """Write a file until about ``free`` bytes are left; returns it."""
        info = os.statvfs(self.folder)
        filler = self.folder / "filler"
        with open(filler, "wb") as handle:
            handle.write(b"\0" * max(info.f_bavail * info.f_frsize - free, 0))
        return filler

    def make_read_only(self) -> None:
        if os.geteuid() == 0:
            if not _mount(["-o", "remount,ro", str(self.folder)]):
                pytest.skip("cannot remount the test file system read-only")
        else:
            for path in self.folder.iterdir():
                path.chmod(0o400)
            self.folder.chmod(0o500)


@pytest.fixture
def small_disk(tmp_path) -> Iterator[SmallDisk]:
    """A 2 MiB disk of its own as root; a plain folder otherwise (no full-disk tests then)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = os.geteuid() == 0 and _mount(["-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(folder)])
    disk = SmallDisk(folder, mounted)
    try:
        yield disk
    finally:
        if mounted:
            _umount(folder)
        elif folder.exists():
            folder.chmod(0o700)
            for path in folder.iterdir():
                path.chmod(0o600)

