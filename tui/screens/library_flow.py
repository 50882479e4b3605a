"""Deleting a saved chat and importing chats from a file, from the keys, as the CLI does.

Deleting asks first, with the chat's title and size, the focus on "Cancel". The chat is
the one highlighted in the session list when the list has the focus, else the open one;
deleting the open chat leaves a new, empty one. Importing reads and checks the whole
file, so it runs in a thread worker; the first chat imported is opened. Conversations of
the file that cannot be read are skipped, and the notification says which and why, as
``llamachat import`` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual.binding import Binding

from sessions.controller import ExchangeError, Imported, NothingToUndo, StoreError
from tui.bindings import current_key, spec
from tui.engine_work import GESTURE_ERRORS
from tui.screens import chat_rules
from tui.screens.dialogs import ConfirmScreen, TextPrompt
from tui.widgets.session_list import UNTITLED

if TYPE_CHECKING:
    from tui.screens.chat_screen import ChatScreen

SKIPPED_SHOWN = 5
"""Skipped conversations named one by one in the notification; more are counted."""
IMPORT_TITLE = ("Import chats from a file (a llamachat JSON export, a llama.cpp web UI export, "
                "ChatGPT's conversations.json)")


def delete_chat(screen: ChatScreen) -> None:
    session_id = screen.session_list.highlighted_id if screen.in_side_panel() else None
    session_id = session_id or screen.controller.session_id
    if session_id is None:
        screen.notify("This chat has no messages yet: there is nothing to delete.", timeout=3)
        return
    try:
        summaries = screen.controller.library.list_sessions()
    except GESTURE_ERRORS as error:  # a damaged or replaced database: say so, delete nothing
        screen.notify(f"Could not read the saved chats: {error}", severity="error", markup=False)
        return
    summary = next((s for s in summaries if s.id == session_id), None)
    if summary is None:
        return
    title = summary.title or UNTITLED

    async def delete() -> None:
        was_open = session_id == screen.controller.session_id
        screen.controller.delete_session(session_id)
        if was_open:
            await screen.new_chat()
        else:
            screen.refresh_panels()
        screen.notify(f"Deleted the chat “{title}”. {undo_hint(screen)}", markup=False)

    async def confirmed(yes: bool | None) -> None:
        if yes:
            await screen.jobs.when_idle(delete)

    question = (f"Delete the chat “{title}” and its {chat_rules.plural(summary.message_count, 'message')}, "
                "on every branch? This cannot be undone.")
    screen.app.push_screen(ConfirmScreen(question), confirmed)


def import_chats(screen: ChatScreen) -> None:
    def chosen(text: str | None) -> None:
        if text:
            path = Path(text).expanduser()
            screen.run_worker(lambda: _import(screen, path), thread=True, group="import", exit_on_error=False,
                              description="importing chats")

    screen.app.push_screen(TextPrompt(IMPORT_TITLE, "~/"), chosen)


def _import(screen: ChatScreen, path: Path) -> None:
    try:
        ids = screen.controller.library.import_file(path)
    except (ExchangeError, StoreError) as error:
        screen.app.call_from_thread(screen.notify, f"Could not import: {error}", severity="error", markup=False)
        return
    screen.app.call_from_thread(_imported, screen, ids)


def _imported(screen: ChatScreen, ids: Imported) -> None:
    if ids.skipped:
        lines = [skipped.line() for skipped in ids.skipped[:SKIPPED_SHOWN]]
        if len(ids.skipped) > SKIPPED_SHOWN:
            lines.append(f"and {len(ids.skipped) - SKIPPED_SHOWN} more")
        screen.notify(f"Imported {chat_rules.plural(len(ids), 'chat')}; "
                      f"{chat_rules.plural(len(ids.skipped), 'conversation')} could not be read and "
                      f"{'was' if len(ids.skipped) == 1 else 'were'} skipped:\n" + "\n".join(lines),
                      severity="warning", timeout=20, markup=False)
    else:
        screen.notify(f"Imported {chat_rules.plural(len(ids), 'chat')}.", timeout=4)
    if ids:
        screen.call_later(screen.jobs.when_idle, lambda: screen.open_chat(ids[0]))


def undo_hint(screen: ChatScreen) -> str:
    """How to bring back what was just deleted, in the words of the key bound to it (the
    user's keymap may have moved it)."""
    key = current_key(spec("undo-delete"), getattr(screen.app, "keymap", {})).split(",")[0]
    return f"{screen.app.get_key_display(Binding(key, ''))} brings it back."


def undo_delete(screen: ChatScreen) -> None:
    """Bring back the latest deletion of this run, and show it."""
    deleted = screen.controller.deletion_to_undo()
    if deleted is None:
        screen.notify("Nothing deleted since the app started is left to bring back.", timeout=3)
        return

    async def put_back() -> None:
        try:
            screen.controller.undo_delete()
        except NothingToUndo as error:
            screen.notify(f"Could not bring it back: {error}.", severity="warning", markup=False)
            return
        except GESTURE_ERRORS as error:
            screen.notify(f"Could not bring it back: {error}", severity="error", markup=False)
            return
        await screen.show_head()
        screen.refresh_panels()
        what = ("the chat" if deleted.kind == "session"
                else chat_rules.plural(deleted.count, "message"))
        screen.notify(f"Brought back {what}.")

    screen.run_worker(screen.jobs.when_idle(put_back), group="undo-delete")
