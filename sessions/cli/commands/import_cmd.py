"""``llamachat import FILE``: sessions from a llamachat, llama.cpp web UI or ChatGPT export.

A large import takes seconds, and may wait for another llamachat's write to finish, so
it is often stopped (Ctrl+C, SIGTERM, SIGHUP) part-way. It runs as ``ask`` does, in a
thread that never receives those signals (``sessions.cli.interrupts``): the signal only
asks it to stop, and the import either rolls back whole, or had already committed and
still says which sessions it made. Either way one line says which, so a user never imports the file
a second time believing the first import lost, nor believes in sessions never saved.

An export of many conversations with some that cannot be read imports the others, then
says on one line each which were skipped and why, and ends with status 1: a script sees
that the file did not come in whole, a person sees what to look at.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from sessions.api.library import ImportStopped, import_file
from sessions.cli.context import CommandContext
from sessions.cli.formatting import title_text
from sessions.cli.interrupts import Interrupts

if TYPE_CHECKING:
    from sessions.api.library import SessionStore


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "import", help="import chats: a llamachat JSON export, a llama.cpp web UI export, ChatGPT's",
        description="Import sessions from a llamachat JSON export, a llama.cpp web UI export "
                    "or a ChatGPT conversations.json. Says which sessions it made, one a line; a "
                    "conversation that cannot be read is skipped, said so, and the status is 1.")
    parser.add_argument("file", metavar="FILE", help="the file to import")
    parser.add_argument("--ids", action="store_true",
                        help="print only the new session ids, one a line (for scripts)")
    return parser


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
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
        ctx.print(new_id if args.ids else made_line(store, new_id))
    for skipped in created.skipped:
        ctx.note(skipped.line())
    if stops.happened:
        ids = ", ".join(map(str, created))
        ctx.note(f"{stops.cause} after the import was saved whole (session{'s' if len(created) > 1 else ''} {ids})")
        return stops.status
    if created.skipped:
        total = len(created) + len(created.skipped)
        ctx.note(f"imported {len(created)} of {total} conversations; {len(created.skipped)} could not be read "
                 "(above) and were skipped")
        return 1
    return 0


def made_line(store: SessionStore, session_id: int) -> str:
    """``Imported session 7: “Title”.``: the id to reopen it with, and which chat it is."""
    return f"Imported session {session_id}: “{title_text(store.get_session(session_id).title)}”."
