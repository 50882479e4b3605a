"""The saved chats from the keys, as the CLI has them: open, rename, export, delete, import.

Deleting asks first, with the chat's title and size, the focus on "Cancel". The chat is
the one highlighted in the session list when the list has the focus, else the open one;
deleting the open chat leaves a new, empty one. Importing reads and checks the whole
file, so it runs in a thread worker; the first chat imported is opened. Conversations of
the file that cannot be read are skipped, and the notification says which and why, as
``llamachat import`` does. Renaming or exporting a chat refused by the store says why.
"""

from __future__ import annotations

from pathlib import Path

from textual.binding import Binding

from sessions.api.library import Imported, NothingToUndo
from sessions.errors import LlamachatError
from tui.bindings import current_key, spec
from tui.screens import chat_rules
from tui.screens.chat_host import ChatHost
from tui.screens.dialogs import ConfirmScreen, ExportScreen, TextPrompt
from tui.screens.opening_flow import new_chat, open_chat
from tui.screens.session_picker import Picked, SessionPicker
from tui.widgets.session_list import UNTITLED

SKIPPED_SHOWN = 5
"""Skipped conversations named one by one in the notification; more are counted."""
IMPORT_TITLE = ("Import chats from a file (a llamachat JSON export, a llama.cpp web UI export, "
                "ChatGPT's conversations.json)")


def pick_chat(screen: ChatHost) -> None:
    async def chosen(choice: Picked | None) -> None:
        if choice is not None:
            await screen.gestures.when_idle(lambda: open_chat(screen, choice.session_id, message_id=choice.message_id))

    screen.app.push_screen(SessionPicker(screen.controller.library, current_id=screen.controller.session_id), chosen)


def rename_chat(screen: ChatHost) -> None:
    snapshot = screen.controller.snapshot()
    if snapshot is None:
        return

    async def renamed(title: str | None) -> None:
        if title is not None and title.strip():
            try:
                screen.controller.rename_session(title.strip())
            except LlamachatError as error:
                screen.refused(str(error))
                return
            await screen.refresh_view()

    screen.app.push_screen(TextPrompt("Rename this chat", snapshot.title), renamed)


def export_chat(screen: ChatHost) -> None:
    session_id = screen.controller.session_id
    if session_id is None:
        screen.notify("This chat has no messages yet: there is nothing to export.", timeout=3)
        return

    def exported(path: Path | None) -> None:
        if path is not None:
            screen.notify(f"Exported to {path}", markup=False)

    screen.app.push_screen(ExportScreen(screen.controller, session_id), exported)


def delete_chat(screen: ChatHost) -> None:
    session_id = screen.session_list.highlighted_id if screen.in_side_panel() else None
    session_id = session_id or screen.controller.session_id
    if session_id is None:
        screen.notify("This chat has no messages yet: there is nothing to delete.", timeout=3)
        return
    try:
        summaries = screen.controller.library.list_sessions()
    except LlamachatError as error:  # a damaged or replaced database: say so, delete nothing
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
            await new_chat(screen)
        else:
            screen.refresh_panels()
        screen.notify(f"Deleted the chat “{title}”. {undo_hint(screen)}", markup=False)

    async def confirmed(yes: bool | None) -> None:
        if yes:
            await screen.gestures.when_idle(delete)

    question = (f"Delete the chat “{title}” and its {chat_rules.plural(summary.message_count, 'message')}, "
                f"on every branch? {undo_hint(screen)}")
    screen.app.push_screen(ConfirmScreen(question, enter_confirms=screen.controller.deletions_undoable), confirmed)


def import_chats(screen: ChatHost) -> None:
    def chosen(text: str | None) -> None:
        if text:
            path = Path(text).expanduser()
            screen.run_worker(lambda: _import(screen, path), thread=True, group="import", exit_on_error=False,
                              description="importing chats")

    screen.app.push_screen(TextPrompt(IMPORT_TITLE, "~/"), chosen)


def _import(screen: ChatHost, path: Path) -> None:
    try:
        ids = screen.controller.library.import_file(path)
    except LlamachatError as error:
        screen.app.call_from_thread(screen.notify, f"Could not import: {error}", severity="error", markup=False)
        return
    screen.app.call_from_thread(_imported, screen, ids)


def _imported(screen: ChatHost, ids: Imported) -> None:
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
        screen.call_later(screen.gestures.when_idle, lambda: open_chat(screen, ids[0]))


def undo_hint(screen: ChatHost) -> str:
    """How to bring back what is deleted, in the words of the key bound to it (the user's
    keymap may have moved it); that it cannot be, where ``undo_minutes = 0``."""
    if not screen.controller.deletions_undoable:
        return "This cannot be undone."
    key = current_key(spec("undo-delete"), getattr(screen.app, "keymap", {})).split(",")[0]
    return f"{screen.app.get_key_display(Binding(key, ''))} brings it back."


def undo_delete(screen: ChatHost) -> None:
    """Bring back the latest deletion of this run, and show it."""
    deleted = screen.controller.deletion_to_undo()
    if deleted is None:
        screen.notify("Nothing deleted since the app started is left to bring back.", timeout=3)
        return

    async def put_back() -> None:
        try:
            brought = screen.controller.undo_delete()
        except NothingToUndo as error:
            screen.notify(f"Could not bring it back: {error}.", severity="warning", markup=False)
            return
        except LlamachatError as error:
            screen.notify(f"Could not bring it back: {error}", severity="error", markup=False)
            return
        await screen.show_head()
        screen.refresh_panels()
        screen.notify(brought.sentence(), markup=False)

    screen.run_worker(screen.gestures.when_idle(put_back), group="undo-delete")
