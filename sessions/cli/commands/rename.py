"""``llamachat rename ID TITLE``: give a session a new title."""

from __future__ import annotations

import argparse

from sessions.cli.arguments import session_id
from sessions.cli.context import CommandContext
from sessions.cli.errors import CliError
from sessions.cli.formatting import title_text


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("rename", help="rename a session",
                                   description="Rename a session (the words of TITLE are joined).")
    parser.add_argument("id", type=session_id, metavar="ID", help="session id")
    parser.add_argument("title", nargs="+", metavar="TITLE", help="the new title")
    return parser


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    title = " ".join(args.title).strip()
    if not title:
        raise CliError("the new title is empty")
    store = ctx.store()
    old = store.get_session(args.id).title
    store.rename_session(args.id, title)
    ctx.print(f"renamed session {args.id}: {title_text(old)} -> {title_text(title)}")
    return 0
