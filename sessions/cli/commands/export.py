"""``llamachat export ID``: a session as Markdown (readable) or JSON (lossless)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from sessions.api.library import export_text, write_export
from sessions.cli.arguments import session_id
from sessions.cli.context import CommandContext
from sessions.cli.interrupts import signals_raise
from sessions.text_safety import inert, json_for_terminal

if TYPE_CHECKING:
    from sessions.api.library import ExportKind


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


def _for_stdout(text: str, fmt: str, out) -> str:
    """JSON stays the same value with C1 controls escaped; Markdown on a terminal is made
    inert (piped into a file it stays exactly the text of the chat)."""
    if fmt == "json":
        return json_for_terminal(text)
    isatty = getattr(out, "isatty", None)
    return inert(text) if isatty is not None and isatty() else text


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    fmt = args.format
    if fmt is None:
        fmt = "json" if args.output and args.output.lower().endswith(".json") else "md"
    kind: ExportKind = "json" if fmt == "json" else "markdown"
    store = ctx.store()
    if not args.output or args.output == "-":
        text = export_text(store, args.id, kind, whole_tree=args.tree)
        ctx.out.write(_for_stdout(text, fmt, ctx.out))
        return 0
    with signals_raise():  # SIGTERM mid-write must not leave the temp file behind
        path = write_export(store, args.id, Path(args.output).expanduser(), kind, whole_tree=args.tree)
    ctx.print(f"exported session {args.id} to {path}")
    return 0
