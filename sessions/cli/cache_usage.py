"""What the checkpoint folder holds, in the words of ``llamachat cache`` and ``llamachat models``
(the counting is the core's: ``sessions.api.checkpoint_files``)."""

from __future__ import annotations

from sessions import paths
from sessions.api.checkpoint_files import folder_usage
from sessions.api.checkpoint_files import model_names as names_in
from sessions.api.settings import size_text
from sessions.cli.context import CommandContext
from sessions.units import human_size


def model_names(ctx: CommandContext) -> dict[str, str]:
    """Model folder name -> the model file last loaded with that fingerprint, as the saved
    chats recorded it (none when there is no database yet: this does not make one)."""
    if not paths.database_file().exists():
        return {}
    return names_in(ctx.store())


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
