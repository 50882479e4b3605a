"""``llamachat import FILE``: sessions from a llamachat, llama.cpp web UI or ChatGPT export."""

from __future__ import annotations

import argparse

from sessions.cli.context import CommandContext


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "import", help="import sessions from a JSON export",
        description="Import sessions from a llamachat JSON export, a llama.cpp web UI export "
                    "or a ChatGPT conversations.json. Prints the new session ids.")
    parser.add_argument("file", metavar="FILE", help="the file to import")
    return parser


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    from sessions.exchange import import_file

    for new_id in import_file(ctx.store(), args.file):
        ctx.print(new_id)
    return 0
