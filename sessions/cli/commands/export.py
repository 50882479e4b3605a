"""``llamachat export ID``: a session as Markdown (readable) or JSON (lossless)."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from sessions.cli.arguments import session_id
from sessions.cli.context import CommandContext
from sessions.cli.errors import CliError


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "export", help="export a session as Markdown or JSON",
        description="Export a session. Markdown holds the active branch (every branch with "
                    "--tree); JSON always holds the whole tree and can be imported back.")
    parser.add_argument("id", type=session_id, metavar="ID", help="session id")
    parser.add_argument("--format", choices=("md", "json"), default=None,
                        help="md (default, or json when FILE ends in .json)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    parser.add_argument("--tree", action="store_true",
                        help="Markdown: include every branch, not just the active one")
    return parser


def write_private(path: Path, text: str) -> None:
    """Replace ``path`` in one step with a file only the user can read (chats are private)."""
    if not path.parent.is_dir():
        raise CliError(f"cannot write {path}: folder {path.parent} does not exist")
    if path.is_dir():
        raise CliError(f"cannot write {path}: it is a folder")
    handle, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _for_stdout(text: str, fmt: str, out) -> str:
    """JSON stays the same value with C1 controls escaped; Markdown on a terminal is made
    inert (piped into a file it stays exactly the text of the chat)."""
    from sessions.text_safety import inert, json_for_terminal

    if fmt == "json":
        return json_for_terminal(text)
    isatty = getattr(out, "isatty", None)
    return inert(text) if isatty is not None and isatty() else text


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    from sessions.exchange import export_json, export_markdown

    fmt = args.format
    if fmt is None:
        fmt = "json" if args.output and args.output.lower().endswith(".json") else "md"
    store = ctx.store()
    if fmt == "json":
        text = json.dumps(export_json(store, args.id), ensure_ascii=False, indent=1) + "\n"
    else:
        text = export_markdown(store, args.id, whole_tree=args.tree)
        text = text if text.endswith("\n") else text + "\n"
    if not args.output or args.output == "-":
        ctx.out.write(_for_stdout(text, fmt, ctx.out))
        return 0
    path = Path(args.output).expanduser()
    write_private(path, text)
    ctx.print(f"exported session {args.id} to {path}")
    return 0
