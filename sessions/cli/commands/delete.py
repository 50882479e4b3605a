"""``llamachat delete ID...``: delete sessions without asking (scripts call it)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from sessions import paths
from sessions.api.library import SessionNotFound
from sessions.cli.arguments import session_id
from sessions.cli.context import CommandContext
from sessions.cli.formatting import title_text
from sessions.cli.interrupts import Interrupts
from sessions.errors import LlamachatError
from sessions.units import human_size

if TYPE_CHECKING:
    from sessions.api.checkpoint_files import ChatsGone
    from sessions.api.library import SessionSummary


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "delete", help="delete sessions (no confirmation)",
        description="Delete sessions and all their messages, without asking. Every id is "
                    "checked first: if one does not exist, nothing is deleted. The checkpoint "
                    "files that only these sessions reach are deleted with them.")
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

    Deleting a long chat takes seconds, much of them in the commit, so a signal is run as
    ``import`` runs it (``sessions.cli.interrupts``): it stops the deletion until the
    commit begins; once it has, the sessions deleted are still listed, and one line says
    which of the two happened.
    """
    # Deferred: the checkpoint store loads numpy, which the CLI does not load to start.
    from sessions.api.checkpoint_files import ChatsGone

    store = ctx.store()
    ids = list(dict.fromkeys(args.ids))
    stops = Interrupts(lambda: None)
    chats = ChatsGone()

    def delete() -> dict[int, SessionSummary]:
        with store.transaction():
            listed = {summary.id: summary for summary in store.list_sessions()}
            missing = next((i for i in ids if i not in listed), None)
            if missing is not None:
                raise SessionNotFound(missing)
            for session_id in ids:
                _check(stops)
                chats.read(store, session_id)  # their tokens go with them
                store.delete_session(session_id)
            _check(stops)
        return listed

    try:
        with stops:
            listed = stops.run(delete)
    except _Stopped:
        ctx.note(f"{stops.cause} before the deletion was saved: nothing was deleted")
        return stops.status
    for summary in (listed[i] for i in ids):
        count = summary.message_count
        ctx.print(f"deleted session {summary.id}: {title_text(summary.title)} "
                  f"({count} message{'' if count == 1 else 's'})")
    if stops.happened:
        ctx.note(f"{stops.cause} after the deletion was saved")
        return stops.status
    _remove_checkpoints(ctx, chats)
    return 0


def _remove_checkpoints(ctx: CommandContext, chats: ChatsGone) -> None:
    """Delete the checkpoint files only the deleted sessions reached. The sessions are
    gone already, so whatever fails here is a warning: the files are evicted in time."""
    try:
        removed = chats.remove_files(ctx.store(), paths.checkpoints_dir())
    except Exception as error:  # never a failed delete: the sessions are gone already
        ctx.note(f"warning: the checkpoint files of the deleted sessions were not removed ({error})")
        return
    if removed.count:
        ctx.note(f"freed {human_size(removed.nbytes)}: {removed.count} checkpoint "
                 f"file{'' if removed.count == 1 else 's'} of the deleted sessions")
    if removed.failures:
        more = f" (and {len(removed.failures) - 1} more)" if len(removed.failures) > 1 else ""
        ctx.note(f"warning: could not delete the checkpoint file {removed.failures[0]}{more}")


class _Stopped(LlamachatError):
    """A signal came before the deletion's commit: it is rolled back."""


def _check(stops: Interrupts) -> None:
    if stops.stop_requested():
        raise _Stopped()
