"""``llamachat delete ID...``: delete sessions without asking (scripts call it)."""

from __future__ import annotations

import argparse

from sessions.cli.arguments import session_id
from sessions.cli.context import CommandContext
from sessions.cli.formatting import title_text


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "delete", help="delete sessions (no confirmation)",
        description="Delete sessions and all their messages, without asking. Every id is "
                    "checked first: if one does not exist, nothing is deleted.")
    parser.add_argument("ids", type=session_id, nargs="+", metavar="ID", help="session id")
    return parser


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    """Read from the session list, not the sessions' rows: one whose stored settings are
    damaged cannot be opened, and deleting it must still work.

    The check and every deletion are one store transaction (the deletions join it as
    savepoints), holding the write lock throughout: another process cannot delete one of
    the ids between the check and the deletions, and a failure or Ctrl+C part-way rolls
    back the ones already deleted, so it is all the ids or none. Nothing is printed until
    the transaction has committed, so no line says "deleted" about a session still there.
    """
    from sessions.store import SessionNotFound

    store = ctx.store()
    ids = list(dict.fromkeys(args.ids))
    with store.transaction():
        listed = {summary.id: summary for summary in store.list_sessions()}
        missing = next((i for i in ids if i not in listed), None)
        if missing is not None:
            raise SessionNotFound(missing)
        for session_id in ids:
            store.delete_session(session_id)
    for summary in (listed[i] for i in ids):
        count = summary.message_count
        ctx.print(f"deleted session {summary.id}: {title_text(summary.title)} "
                  f"({count} message{'' if count == 1 else 's'})")
    return 0
