"""``llamachat delete ID...``: delete sessions without asking (scripts call it)."""

from __future__ import annotations

import argparse

from sessions.cli.arguments import session_id
from sessions.cli.context import CommandContext


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "delete", help="delete sessions (no confirmation)",
        description="Delete sessions and all their messages, without asking. Every id is "
                    "checked first: if one does not exist, nothing is deleted.")
    parser.add_argument("ids", type=session_id, nargs="+", metavar="ID", help="session id")
    return parser


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    store = ctx.store()
    ids = list(dict.fromkeys(args.ids))
    doomed = [(store.get_session(i), len(store.load_tree(i))) for i in ids]
    for session, count in doomed:
        store.delete_session(session.id)
        ctx.print(f"deleted session {session.id}: {session.title or '(untitled)'} "
                  f"({count} message{'' if count == 1 else 's'})")
    return 0
