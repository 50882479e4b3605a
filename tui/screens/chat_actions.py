"""Gestures on the conversation tree: select, page, edit, regenerate, fork, rewind, delete.

Each action works on the *selected* message (moved with ctrl+up/down), or on the last
fitting message of the branch when nothing is selected, so the common case needs no
selection at all. Anything that changes the branch waits for the engine to be idle and
stops a reply being written first (``when_idle``): the reply written so far is kept as
its own version, then the gesture applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from sessions.controller import ContextOverflow
from sessions.tree import Message
from tui.screens.dialogs import ConfirmScreen
from tui.widgets.message_view import code_blocks

if TYPE_CHECKING:
    from tui.screens.main_screen import MainScreen

SLOW_SWITCH_TOKENS = 256
SLOW_SWITCH_SECONDS = 1.0


def seconds_words(seconds: float) -> str:
    return "under 1 s" if seconds < 1 else f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


@dataclass(frozen=True)
class InputMode:
    """What the next send does: a normal message, a new version of one, or a fork."""

    kind: Literal["send", "edit", "fork"] = "send"
    target_id: int | None = None


class ChatActions:
    """Mixin of ``MainScreen``: the tree gestures."""

    # -- finding the message an action applies to --------------------------------------------

    def target(self: MainScreen, *roles: str) -> Message | None:
        """The selected message, else the last message of the branch with one of ``roles``."""
        conversation = self.controller.conversation
        if conversation is None:
            return None
        selected = self.conversation_view.selected_id
        if selected is not None and selected in conversation.tree:
            message = conversation.tree.get(selected)
            return message if not roles or message.role in roles else None
        for message in reversed(conversation.active_path()):
            if not roles or message.role in roles:
                return message
        return None

    def set_mode(self: MainScreen, mode: InputMode) -> None:
        self.mode = mode
        box = self.chat_input
        box.set_class(mode.kind != "send", "-special")
        titles = {"edit": "Editing: Enter saves a new version (the original stays), Esc cancels",
                  "fork": "Forking: the next message starts a new branch here, Esc cancels"}
        box.border_title = titles.get(mode.kind)

    # -- moving around ----------------------------------------------------------------------

    def action_select_message(self: MainScreen, delta: int) -> None:
        conversation = self.controller.conversation
        ids = [m.id for m in conversation.active_path()] if conversation else []
        if not ids:
            return
        current = self.conversation_view.selected_id
        if current not in ids:
            index = len(ids) - 1 if delta < 0 else None
        else:
            index = ids.index(current) + delta
            index = None if index >= len(ids) else max(0, index)
        self.conversation_view.select(None if index is None else ids[index])

    async def action_sibling(self: MainScreen, delta: int) -> None:
        message = self.target()
        if message is None:
            return
        if len(self.controller.conversation.tree.siblings(message.id)) < 2:
            self.notify("This message has no other versions.", timeout=3)
            return

        async def page() -> None:
            shown = self.controller.conversation.sibling(message.id, delta)
            self.conversation_view.select(shown.id)
            await self.refresh_view()
            await self.after_switch()

        await self.when_idle(page)

    async def after_switch(self: MainScreen) -> None:
        """After the branch changed: say what making it live costs, then do it in the background."""
        conversation = self.controller.conversation
        if not self.model_ready or conversation is None or conversation.head is None or self.engine_jobs():
            return
        try:
            plan = self.controller.plan_for(conversation.head.id)
        except Exception as error:  # a template that fails on this branch, a store error
            self.notify(f"Cannot prepare this branch: {error}", severity="error", markup=False)
            return
        if plan.tokens_to_evaluate > SLOW_SWITCH_TOKENS or plan.estimate_seconds > SLOW_SWITCH_SECONDS:
            note = (f"switching will evaluate {plan.tokens_to_evaluate:,} tokens "
                    f"(~{seconds_words(plan.estimate_seconds)})")
            self.status.set_note(note)
            self.notify(note, timeout=4)
        self.controller.reset_cancel()  # the engine is idle here: an old stop must not hit this job
        self.warm_job(conversation.head.id)

    # -- changing the tree ------------------------------------------------------------------

    def action_edit(self: MainScreen) -> None:
        message = self.target()
        if message is None:
            self.notify("There is no message to edit yet.")
            return
        self.chat_input.set_draft(message.text)
        self.set_mode(InputMode("edit", message.id))

    async def action_regenerate(self: MainScreen) -> None:
        message = self.target()
        if message is None or message.role == "system":
            self.notify("Select a reply (or the message it answers) to regenerate.")
            return

        async def regenerate() -> None:
            if message.role == "assistant":
                self.controller.regenerate_point(message.id)
            else:  # a user message: a new answer to it, beside any existing one
                self.controller.conversation.rewind(message.id)
            self.conversation_view.select(None)
            await self.refresh_view()
            await self.start_reply()

        await self.when_idle(regenerate)

    def action_fork(self: MainScreen) -> None:
        message = self.target()
        if message is None:
            return
        if message.role == "user":
            self.notify("Fork after a reply (select one with Ctrl+Up); to change this message, edit it (F2).")
            return
        self.set_mode(InputMode("fork", message.id))
        self.chat_input.focus()

    async def action_rewind(self: MainScreen) -> None:
        selected = self.conversation_view.selected_id
        if selected is None:
            self.notify("Select the message to go back to first (Ctrl+Up).")
            return

        async def rewind() -> None:
            self.controller.conversation.rewind(selected)
            self.conversation_view.select(selected)
            await self.refresh_view()
            self.status.set_note("rewound: the next message continues from here")

        await self.when_idle(rewind)

    def action_delete_branch(self: MainScreen) -> None:
        message = self.target()
        if message is None:
            return
        count = self.controller.conversation.tree.subtree_size(message.id)
        below = count - 1
        question = (f"Delete this message and the {below} message{'s' if below != 1 else ''} below it "
                    f"on every branch? {count} message{'s' if count != 1 else ''} will be deleted.")

        async def confirmed(yes: bool | None) -> None:
            if yes:
                await self.when_idle(lambda: self.delete_now(message.id))

        self.app.push_screen(ConfirmScreen(question), confirmed)

    async def delete_now(self: MainScreen, message_id: int) -> None:
        count = self.controller.conversation.delete_subtree(message_id)
        self.conversation_view.select(None)
        await self.refresh_view()
        self.notify(f"Deleted {count} message{'s' if count != 1 else ''}.")

    # -- a branch longer than the context ---------------------------------------------------

    def offer_trim(self: MainScreen, error: ContextOverflow) -> None:
        """The branch no longer fits: offer to go on in a new branch without the oldest turns.

        When nothing precedes the message but a system prompt, there is nothing to leave
        out, so the dialog would only fail later: say so at once instead.
        """
        conversation = self.controller.conversation
        head = conversation.head if conversation is not None else None
        if head is None or head.role != "user":
            return
        earlier = [m for m in conversation.active_path()[:-1] if m.role != "system"]
        words = str(error)
        words = words[:1].upper() + words[1:]
        if not earlier:
            self.notify(f"{words}: this message alone does not fit. Edit it (F2) to shorten it, "
                        "or use a larger context (n_ctx in config.toml).",
                        severity="error", timeout=10, markup=False)
            return
        question = (f"{words}. Continue in a new branch without the oldest turns? "
                    "This branch stays as it is; you can page back to it.")

        async def chosen(yes: bool | None) -> None:
            if yes:
                await self.when_idle(lambda: self.start_trim(head.id))

        self.app.push_screen(ConfirmScreen(question, "Continue in a new branch", yes_variant="primary"), chosen)

    def start_trim(self: MainScreen, leaf_id: int) -> None:
        self.status.set_note("making a branch without the oldest turns…")
        self.controller.reset_cancel()  # the engine is idle here: an old stop must not hit this job
        self.trim_job(leaf_id)

    async def trimmed(self: MainScreen, head: Message) -> None:
        """The shorter branch exists and is the head: show it and answer its last message."""
        self.conversation_view.select(None)
        await self.refresh_view()
        self.status.set_note("continued in a new branch without the oldest turns")
        await self.start_reply()

    # -- stop, copy -------------------------------------------------------------------------

    def action_stop(self: MainScreen) -> None:
        if self.engine_jobs("generate", "warm"):
            self.controller.cancel()
        elif self.mode.kind != "send":
            if self.mode.kind == "edit":
                self.chat_input.clear()
            self.set_mode(InputMode())
        else:
            self.conversation_view.select(None)

    def action_copy_message(self: MainScreen) -> None:
        message = self.target()
        if message is not None:
            self.app.copy_to_clipboard(message.text)
            self.notify("Copied the message.", timeout=2)

    def action_copy_code(self: MainScreen) -> None:
        conversation = self.controller.conversation
        selected = self.conversation_view.selected_id
        candidates = [conversation.tree.get(selected)] if conversation and selected is not None else (
            list(reversed(conversation.active_path())) if conversation else [])
        for message in candidates:
            blocks = code_blocks(message.text)
            if blocks:
                self.app.copy_to_clipboard(blocks[-1])
                self.notify("Copied the code block.", timeout=2)
                return
        self.notify("No code block to copy.", timeout=2)
