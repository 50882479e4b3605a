"""``llamachat import FILE``: sessions from a llamachat, llama.cpp web UI or ChatGPT export.

A large import takes seconds, and may wait for another llamachat's write to finish, so
it is often stopped (Ctrl+C, SIGTERM, SIGHUP) part-way. It runs as ``ask`` does, in a
thread that never receives those signals (``sessions.cli.interrupts``): the signal only
asks it to stop, and the import either rolls back whole, or had already committed and
still prints its ids. Either way one line says which, so a user never imports the file
a second time believing the first import lost, nor believes in sessions never saved.
"""

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
    from sessions.cli.interrupts import Interrupts
    from sessions.exchange import ImportStopped, import_file

    store = ctx.store()
    stops = Interrupts(lambda: None)  # the import asks ``stop_requested`` between its steps
    try:
        with stops:
            created = stops.run(lambda: import_file(store, args.file, should_stop=stops.stop_requested,
                                                     sampling=ctx.config.effective_sampling()))
    except ImportStopped:
        ctx.note(f"{stops.cause} before the import was saved: nothing was imported")
        return stops.status
    for new_id in created:
        ctx.print(new_id)
    if stops.happened:
        ids = ", ".join(map(str, created))
        ctx.note(f"{stops.cause} after the import was saved whole (session{'s' if len(created) > 1 else ''} {ids})")
        return stops.status
    return 0
