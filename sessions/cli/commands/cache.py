"""``llamachat cache``: the checkpoint files on disk, their budget, and clearing them.

``cache`` (or ``cache show``) prints the folder, the bytes used against ``max_disk`` and
the files per model; with ``--session ID`` also what that chat's branches reach: its own
files and those it shares with other chats. ``cache clear --session ID`` deletes that
chat's own files, ``cache clear --all`` every checkpoint file. Both ask nothing and may
run while the app uses the folder: files are only deleted, and what the app then misses
it recomputes.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sessions import paths
from sessions.api.settings import size_text
from sessions.cli.context import CommandContext
from sessions.cli.errors import UsageError
from sessions.cli.formatting import table
from sessions.units import human_size

if TYPE_CHECKING:
    from sessions.api.checkpoint_files import Removed


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "cache", help="show or clear the checkpoint files on disk",
        description=__doc__.split("\n\n", 1)[1].replace("``", "`"))
    parser.add_argument("action", nargs="?", choices=("show", "clear"), default="show",
                        help="show (the default) or clear")
    parser.add_argument("--all", action="store_true", help="with clear: delete every checkpoint file")
    parser.add_argument("--json", action="store_true", help="with show: print JSON")
    return parser


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    folder = paths.checkpoints_dir()
    if args.action == "clear":
        if args.json:
            raise UsageError("--json is for `cache show`")
        if args.all == (args.session is not None):
            raise UsageError("`cache clear` takes --session ID or --all")
        return _clear_all(ctx, folder) if args.all else _clear_session(ctx, folder, args.session)
    if args.all:
        raise UsageError("--all is for `cache clear`")
    return _show(ctx, folder, args.session, args.json)


def _show(ctx: CommandContext, folder: Path, session_id: int | None, as_json: bool) -> int:
    # Deferred: the checkpoint store loads numpy, which the CLI does not load to start.
    from sessions.api.checkpoint_files import chat_share, folder_usage
    from sessions.cli.cache_usage import budget_words, model_names

    usage = folder_usage(folder)
    names = model_names(ctx) if usage.by_model else {}
    budget = ctx.config.checkpoints.max_disk
    share = chat_share(ctx.store(), folder, session_id) if session_id is not None else None
    if as_json:
        value: dict = {
            "folder": str(folder), "bytes": usage.nbytes, "disk_bytes": usage.on_disk, "files": usage.count,
            "budget": budget, "parked_budget": ctx.config.checkpoints.parked_mb << 20,
            "models": [{"folder": name, "model": names.get(name), "files": count, "disk_bytes": on_disk}
                       for name, (count, on_disk) in usage.by_model.items()],
        }
        if share is not None:
            value["session"] = {"id": session_id, "own_files": share.own_files, "own_bytes": share.own_bytes,
                                "shared_files": share.shared_files, "shared_bytes": share.shared_bytes}
        ctx.print_json(value)
        return 0
    ctx.print(f"checkpoint folder: {folder}")
    ctx.print(f"used: {human_size(usage.on_disk)} on disk ({human_size(usage.nbytes)} in the files) of "
              f"{budget_words(budget)}, {_files(usage.count)}")
    parked = ctx.config.checkpoints.parked_mb
    ctx.print(f"parked branches: up to {size_text(parked << 20)} of a GPU's memory (checkpoints.parked_mb)"
              if parked else "parked branches: off (checkpoints.parked_mb = 0)")
    if usage.by_model:
        rows = [["MODEL", "FILES", "ON DISK", "FOLDER"]]
        for name, (count, nbytes) in usage.by_model.items():
            rows.append([Path(names[name]).name if name in names else "(unknown model)", str(count),
                         human_size(nbytes), name])
        for line in table(rows):
            ctx.print(line)
    if share is not None:
        ctx.print(f"session {session_id}: {_files(share.own_files)}, {human_size(share.own_bytes)}, its own; "
                  f"{_files(share.shared_files)}, {human_size(share.shared_bytes)}, shared with other sessions")
    return 0


def _clear_session(ctx: CommandContext, folder: Path, session_id: int) -> int:
    # Deferred: the checkpoint store loads numpy, which the CLI does not load to start.
    from sessions.api.checkpoint_files import clear_chat

    removed, share = clear_chat(ctx.store(), folder, session_id)
    kept = f" ({_files(share.shared_files)} shared with other sessions kept)" if share.shared_files else ""
    ctx.print(f"freed {human_size(removed.nbytes)}: {_files(removed.count)} of session {session_id} "
              f"deleted{kept}")
    return _failures(ctx, removed)


def _clear_all(ctx: CommandContext, folder: Path) -> int:
    # Deferred: the checkpoint store loads numpy, which the CLI does not load to start.
    from sessions.api.checkpoint_files import clear_all

    removed = clear_all(folder)
    if removed.failures:  # a read-only disk, say: not all there were
        ctx.print(f"freed {human_size(removed.nbytes)}: {removed.count} of {_files(removed.asked)} deleted, "
                  f"{len(removed.failures)} could not be")
    else:
        ctx.print(f"freed {human_size(removed.nbytes)}: {_files(removed.count)} deleted, all there were")
    return _failures(ctx, removed)


def _failures(ctx: CommandContext, removed: Removed) -> int:
    failures = removed.failures
    if not failures:
        return 0
    more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
    ctx.note(f"error: could not delete {failures[0]}{more}")
    return 1


def _files(count: int) -> str:
    return f"{count} checkpoint file{'' if count == 1 else 's'}"
