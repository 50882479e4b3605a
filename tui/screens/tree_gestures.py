"""The user's gestures on the chat's messages: select, page, edit, regenerate, continue,
fork, rewind, delete, stop, copy.

Anything that changes the branch waits for the engine to be idle and stops a reply being
written first (``GestureQueue.when_idle``): the reply written so far is kept as its own
version, then the gesture applies.
"""

from __future__ import annotations

from dataclasses import replace

from sessions.tree import Message
from tui.screens import chat_rules, library_flow
from tui.screens.chat_host import ChatHost
from tui.screens.chat_rules import InputMode
from tui.screens.cut_point import CutPoint
from tui.screens.dialogs import ConfirmScreen
from tui.screens.job_flow import after_switch, start_reply

SWITCH_STOPPED = "switch stopped: what is left of the branch is read before its next reply"


def target(screen: ChatHost, *roles: str) -> Message | None:
    """The message a gesture applies to: the one selected, else the last of the branch
    (with one of ``roles``, when given: ``chat_rules.target``)."""
    return chat_rules.target(screen.controller.snapshot(), screen.conversation_view.selected_id, *roles)


def select_message(screen: ChatHost, delta: int) -> None:
    snapshot = screen.controller.snapshot()
    ids = [m.id for m in snapshot.path] if snapshot else []
    screen.conversation_view.select(chat_rules.step_selection(ids, screen.conversation_view.selected_id, delta))


async def sibling(screen: ChatHost, delta: int) -> None:
    if await screen.conversation_view.page_versions(delta):  # versions still being written
        return
    message = target(screen)
    snapshot = screen.controller.snapshot()
    if message is None or snapshot is None:
        return
    if len(snapshot.tree.siblings(message.id)) < 2:
        screen.notify("This message has no other versions.", timeout=3)
        return

    async def page() -> None:
        shown = screen.controller.sibling(message.id, delta)
        await screen.show_head(selected=shown.id)
        await after_switch(screen)
        versions = [m.id for m in snapshot.tree.siblings(message.id)]
        ahead = versions.index(shown.id) + (1 if delta > 0 else -1)
        if 0 <= ahead < len(versions):  # the version the next page in this direction shows
            screen.warm_ahead.rest_on(versions[ahead], page=True)

    await screen.gestures.when_idle(page)


def edit(screen: ChatHost) -> None:
    message = target(screen)
    if message is None:
        screen.notify("There is no message to edit yet.")
        return
    kept = screen.mode.draft if screen.mode.kind == "edit" else screen.chat_input.text
    screen.chat_input.set_draft(message.text)
    screen.set_mode(InputMode("edit", message.id, draft=kept))
    if kept.strip():
        screen.status.set_note("what you were writing comes back after the edit (Esc cancels it)")


def regenerate_target(screen: ChatHost) -> Message | None:
    """The message whose question a regenerate answers again (None: said why)."""
    message = target(screen)
    if message is None or message.role == "system":
        screen.notify("Select a reply (or the message it answers) to regenerate.")
        return None
    return message


async def regenerate(screen: ChatHost) -> None:
    """A new version of the selected reply (several at once: ``several_versions``)."""
    message = regenerate_target(screen)
    if message is None:
        return

    async def again() -> None:
        screen.controller.regenerate(message.id)
        await screen.show_head()
        await start_reply(screen)

    await screen.gestures.when_idle(again)


async def continue_reply(screen: ChatHost) -> None:
    message = target(screen, "assistant")
    problem = chat_rules.continue_problem(message)
    if problem is None and not screen.jobs.model_ready:
        problem = "No model is loaded: press F5 to choose one."
    if problem is not None or message is None:
        screen.notify(problem or "There is no reply to continue.", timeout=4)
        return

    async def go_on() -> None:
        screen.status.set_speed(None)
        await screen.conversation_view.begin_reply(continued=message)
        screen.jobs.continue_reply(message.id)

    await screen.gestures.when_idle(go_on)


def continue_from(screen: ChatHost) -> None:
    """Choose a place inside the selected reply, then write a new version that keeps the
    reply up to there and goes on (``SessionController.continue_from``)."""
    message = target(screen, "assistant")
    if message is None or message.role != "assistant":
        screen.notify("Select the reply to go on from first (Ctrl+Up).", timeout=4)
        return
    if not screen.jobs.model_ready:
        screen.notify("No model is loaded: press F5 to choose one.", timeout=4)
        return
    problem = chat_rules.continue_from_problem(message, screen.controller.model_info, screen.key_of("continue-reply"))
    if problem is not None:
        screen.notify(problem, timeout=6)
        return
    which = ("" if screen.conversation_view.selected_id == message.id
             else f"The last reply (select another with {screen.key_of('message-previous')}). ")

    async def go_on(chars: int) -> None:
        screen.status.set_speed(None)
        await screen.conversation_view.begin_reply(continued=replace(message, text=message.text[:chars]))
        screen.jobs.continue_from(message.id, chars)

    async def chosen(chars: int | None) -> None:
        if chars is not None:
            await screen.gestures.when_idle(lambda: go_on(chars))

    screen.app.push_screen(CutPoint(message.text, which=which), chosen)


def fork(screen: ChatHost) -> None:
    message = target(screen)
    if message is None:
        return
    if message.role == "user":
        screen.notify("Fork after a reply (select one with Ctrl+Up); to change this message, edit it (F2).")
        return
    screen.set_mode(InputMode("fork", message.id))
    screen.chat_input.focus()


async def rewind(screen: ChatHost) -> None:
    selected = screen.conversation_view.selected_id
    if selected is None:
        screen.notify("Select the message to go back to first (Ctrl+Up).")
        return

    async def back() -> None:
        before = screen.controller.snapshot()
        left = before.head if before is not None else None
        head = screen.controller.rewind(selected)
        mode = InputMode("rewind", left.id, joins=head.role == "user") if left and left.id != head.id else None
        await screen.show_head(mode, selected=head.id)
        screen.status.set_note("rewound: the next message joins your message there" if head.role == "user"
                               else "rewound: the next message continues from here")

    await screen.gestures.when_idle(back)


async def undo_rewind(screen: ChatHost, head_id: int) -> None:
    """Esc after a rewind: the branch shown before it, at the head it had."""

    async def again() -> None:
        screen.controller.select(head_id)
        await screen.show_head(InputMode())
        await after_switch(screen)

    await screen.gestures.when_idle(again)


async def delete_branch(screen: ChatHost) -> None:
    # What the user is looking at when the key is pressed: the tree's cursor while the
    # tree has the focus, not the chat's selection hidden beside it.
    chosen = screen.tree_panel.cursor_message_id if screen.tree_has_focus() else None
    if screen.tree_has_focus() and chosen is None:  # a line that stands for messages not drawn
        screen.notify("Put the tree's cursor on a message to delete it and what follows it.")
        return
    # a reply being written stops and is counted
    await screen.gestures.when_idle(lambda: ask_delete(screen, chosen))


def ask_delete(screen: ChatHost, chosen: int | None = None) -> None:
    """Ask about the branch below ``chosen`` (None: the chat's target), naming the
    message; delete exactly the messages counted.

    If another window or command changed that branch meanwhile, nothing is deleted:
    the refusal says so and the chat is shown as it is now (``Conversation``).
    """
    snapshot = screen.controller.snapshot()
    message: Message | None = target(screen) if chosen is None else snapshot.message(chosen) if snapshot else None
    if message is None or snapshot is None:
        return
    counted = [message.id, *(m.id for m in snapshot.tree.descendants(message.id))]

    async def delete() -> None:
        count = screen.controller.delete_subtree(message.id, expected_ids=counted)
        await screen.show_head()
        screen.notify(f"Deleted {chat_rules.plural(count, 'message')}. {library_flow.undo_hint(screen)}")

    async def confirmed(yes: bool | None) -> None:
        if yes:
            await screen.gestures.when_idle(delete)

    question = f"{chat_rules.delete_question(message, len(counted))} {library_flow.undo_hint(screen)}"
    screen.app.push_screen(ConfirmScreen(question, enter_confirms=screen.controller.deletions_undoable), confirmed)


def stop(screen: ChatHost) -> None:
    from_panel = screen.in_side_panel()
    if from_panel:
        screen.chat_input.focus()
    if screen.jobs.running("generate", "warm"):
        if screen.jobs.running("warm"):
            screen.status.set_note(SWITCH_STOPPED)
        screen.controller.cancel()
    elif screen.jobs.loading and screen.controller.stop_template_render():
        return  # the load goes on with a built-in template, and its notice says why
    elif from_panel:
        return
    elif screen.mode.kind == "rewind" and screen.mode.target_id is not None:
        screen.call_later(undo_rewind, screen, screen.mode.target_id)
    elif screen.mode.kind != "send":
        screen.set_mode(InputMode())
        screen.status.set_note("")
    else:
        screen.conversation_view.select(None)


def copy_message(screen: ChatHost) -> None:
    message = target(screen)
    if message is not None:
        screen.app.copy_to_clipboard(message.text)
        screen.notify("Copied the message.", timeout=2)


def copy_code(screen: ChatHost) -> None:
    block = chat_rules.last_code_block(screen.controller.snapshot(), screen.conversation_view.selected_id)
    if block is None:
        screen.notify("No code block to copy.", timeout=2)
        return
    screen.app.copy_to_clipboard(block)
    screen.notify("Copied the code block.", timeout=2)
