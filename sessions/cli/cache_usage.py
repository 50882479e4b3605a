"""What the checkpoint folder holds, per model, for ``llamachat cache`` and ``llamachat models``.

Counting costs two stats per file (no header is read), so ``models`` can say it too. The
use is the disk blocks the files take (what a full disk counts), beside the bytes they
hold: a file of 100 bytes takes a block of 4 KB.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from sessions import paths
from sessions.checkpoints import list_files
from sessions.checkpoints.keys import model_folder
from sessions.cli.context import CommandContext
from sessions.config.sizes import size_text
from sessions.units import human_size


@dataclass
class FolderUsage:
    """Checkpoint files and bytes in a folder, and per model folder (largest first)."""

    count: int = 0
    nbytes: int = 0
    """Bytes the files hold."""
    on_disk: int = 0
    """Bytes of the disk blocks they take."""
    by_model: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Model folder name -> (files, bytes on disk)."""


def folder_usage(folder: Path) -> FolderUsage:
    usage = FolderUsage()
    per_model: dict[str, list[int]] = {}
    for file in list_files(folder, headers=False):
        taken = allocated(file.path, file.size)
        usage.count += 1
        usage.nbytes += file.size
        usage.on_disk += taken
        totals = per_model.setdefault(file.model_folder, [0, 0])
        totals[0] += 1
        totals[1] += taken
    usage.by_model = {name: (count, nbytes) for name, (count, nbytes)
                      in sorted(per_model.items(), key=lambda item: -item[1][1])}
    return usage


def allocated(path: Path, size: int) -> int:
    """The bytes of the disk blocks ``path`` takes (``size`` where the system does not say)."""
    try:
        blocks = getattr(os.stat(path), "st_blocks", None)
    except OSError:
        return size
    return size if blocks is None else blocks * 512


def model_names(ctx: CommandContext) -> dict[str, str]:
    """Model folder name -> the model file last loaded with that fingerprint, as the saved
    chats recorded it (none when there is no database yet: this does not make one)."""
    if not paths.database_file().exists():
        return {}
    return {model_folder(fingerprint): path for fingerprint, path in ctx.store().models_by_fingerprint().items()}


def usage_line(ctx: CommandContext) -> str:
    """One line: the bytes and files in the checkpoint folder against the budget."""
    usage = folder_usage(paths.checkpoints_dir())
    files = f"{usage.count} file{'' if usage.count == 1 else 's'}"
    return (f"checkpoints: {human_size(usage.on_disk)} on disk in {files} of "
            f"{budget_words(ctx.config.checkpoints.max_disk)}; `llamachat cache` shows them")


def budget_words(nbytes: int) -> str:
    """The checkpoints' disk budget in the units the sizes beside it use (a size in the
    config's own spelling, "20GiB", read as 20 beside a "4.6 MB" in decimal units), with
    that spelling after it: ``21.5 GB (checkpoints.max_disk = "20GiB")``."""
    return f'{human_size(nbytes)} (checkpoints.max_disk = "{size_text(nbytes)}")'
