"""``llamachat sessions``: one line per saved session, newest first; a chat that
``llamachat serve`` keeps for its clients says so."""

from __future__ import annotations

import argparse

from sessions.cli.context import CommandContext
from sessions.cli.formatting import iso_time, local_time, table, title_text


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("sessions", help="list saved sessions",
                                   description="List saved sessions, most recently updated first.")
    parser.add_argument("--search", metavar="Q", help="only sessions whose title or messages match")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead")
    return parser


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    summaries = ctx.store().list_sessions(search=args.search)
    if args.json:
        ctx.print_json([
            {"id": s.id, "title": s.title, "updated_at": iso_time(s.updated_at),
             "message_count": s.message_count, "served": s.served}
            for s in summaries
        ])
        return 0
    if not summaries:
        ctx.note(f"no sessions match {args.search!r}" if args.search else "no sessions yet")
        return 0
    rows = [[str(s.id), local_time(s.updated_at),
             f"{s.message_count} message{'' if s.message_count == 1 else 's'}",
             title_text(s.title) + ("  (served)" if s.served else "")]
            for s in summaries]
    for line in table(rows):
        ctx.print(line)
    return 0
