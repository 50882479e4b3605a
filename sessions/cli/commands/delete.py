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
    """Read from the session list, not the sessions' rows: one whose stored settings are
    damaged cannot be opened, and deleting it must still work."""
    from sessions.store import SessionNotFound

    store = ctx.store()
    ids = list(dict.fromkeys(args.ids))
    listed = {summary.id: summary for summary in store.list_sessions()}
    missing = next((i for i in ids if i not in listed), None)
    if missing is not None:
        raise SessionNotFound(missing)
    for summary in (listed[i] for i in ids):
        store.delete_session(summary.id)
        count = summary.message_count
        ctx.print(f"deleted session {summary.id}: {summary.title or '(untitled)'} "
                  f"({count} message{'' if count == 1 else 's'})")
    return 0
