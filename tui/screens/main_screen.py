"""The chat screen: a short handler for every key and click, each asking the controller.

The layout, the engine jobs and what the core reports are ``ChatScreen``'s; this class
adds the user's gestures. Anything that changes the branch waits for the engine to be
idle and stops a reply being written first (``EngineWork.when_idle``): the reply written
so far is kept as its own version, then the gesture applies.
"""

from __future__ import annotations

from pathlib import Path

from textual import events, on

from sessions.controller import Message
from tui.bindings import bindings_for
from tui.engine_work import GESTURE_ERRORS
from tui.screens import chat_rules, library_flow, settings_flow
from tui.screens.chat_rules import InputMode
from tui.screens.chat_screen import ChatScreen
from tui.screens.dialogs import ConfirmScreen, ExportScreen, TextPrompt
from tui.screens.session_picker import Picked, SessionPicker
from tui.widgets.chat_input import ChatInput
from tui.widgets.message_view import MessageView
from tui.widgets.session_list import SessionList
from tui.widgets.tree_panel import TreePanel


class MainScreen(ChatScreen):
    """The chat screen with its keys (``tui.bindings``), the input and the panels' choices."""

    BINDINGS = bindings_for("screen")

    def target(self, *roles: str) -> Message | None:
        return chat_rules.target(self.controller.snapshot(), self.conversation_view.selected_id, *roles)

    async def refresh_view(self) -> None:
        """Show the chat; an edit or fork whose message is gone (deleted here or by another
        window) ends as Esc would end it, or every send would be refused."""
        await super().refresh_view()
        target_id = self.mode.target_id
        if target_id is None:
            return
        try:
            snapshot = self.controller.snapshot()
        except GESTURE_ERRORS:  # unreadable now: the chat's view said so, and the mode stays
            return
        if snapshot is None or target_id not in snapshot.tree:
            self.set_mode(InputMode())
            self.status.set_note("")  # "what you were writing comes back after the edit": it has

    # -- sending and replies --------------------------------------------------------------

    @on(ChatInput.Submitted)
    async def submitted(self, event: ChatInput.Submitted) -> None:
        if not event.text.strip():
            return
        if self.jobs.generating:
            self.notify("A reply is being written: press Esc to stop it, then send.", severity="warning")
            return
        try:
            before = self.controller.snapshot()
            if before is None:
                self.controller.new_session(system_prompt=self.config.system_prompt)
            if self.mode.kind == "edit" and self.mode.target_id is not None:
                message = self.controller.edit(self.mode.target_id, event.text)
            else:
                message = self.controller.send(event.text, parent_id=self.mode.target_id)
        except GESTURE_ERRORS as error:
            self.refused(str(error))
            return
        self.chat_input.clear()
        await self.show_head(InputMode())  # after an edit, the draft it replaced comes back
        if message.role == "user" and (message.text != event.text or before and message.id in before.tree):
            self.notify(chat_rules.joined_note(message, event.text), timeout=6)
        if message.role == "user":
            await (self.jobs.when_idle(self.start_reply) if self.model_ready else self.start_reply())

    # -- gestures on the tree ---------------------------------------------------------------

    def action_select_message(self, delta: int) -> None:
        snapshot = self.controller.snapshot()
        ids = [m.id for m in snapshot.path] if snapshot else []
        self.conversation_view.select(chat_rules.step_selection(ids, self.conversation_view.selected_id, delta))

    async def action_sibling(self, delta: int) -> None:
        message = self.target()
        snapshot = self.controller.snapshot()
        if message is None or snapshot is None:
            return
        if len(snapshot.tree.siblings(message.id)) < 2:
            self.notify("This message has no other versions.", timeout=3)
            return

        async def page() -> None:
            await self.show_head(selected=self.controller.sibling(message.id, delta).id)
            await self.after_switch()

        await self.jobs.when_idle(page)

    def action_edit(self) -> None:
        message = self.target()
        if message is None:
            self.notify("There is no message to edit yet.")
            return
        kept = self.mode.draft if self.mode.kind == "edit" else self.chat_input.text
        self.chat_input.set_draft(message.text)
        self.set_mode(InputMode("edit", message.id, draft=kept))
        if kept.strip():
            self.status.set_note("what you were writing comes back after the edit (Esc cancels it)")

    async def action_regenerate(self) -> None:
        message = self.target()
        if message is None or message.role == "system":
            self.notify("Select a reply (or the message it answers) to regenerate.")
            return

        async def regenerate() -> None:
            self.controller.regenerate(message.id)
            await self.show_head()
            await self.start_reply()

        await self.jobs.when_idle(regenerate)

    async def action_continue_reply(self) -> None:
        message = self.target("assistant")
        problem = chat_rules.continue_problem(message)
        if problem is None and not self.model_ready:
            problem = "No model is loaded: press F5 to choose one."
        if problem is not None or message is None:
            self.notify(problem or "There is no reply to continue.", timeout=4)
            return

        async def go_on() -> None:
            self.status.set_speed(None)
            await self.conversation_view.begin_reply(continued=message)
            self.jobs.continue_reply(message.id)

        await self.jobs.when_idle(go_on)

    def action_toggle_reasoning(self) -> None:
        view = self.conversation_view
        view.set_reasoning_shown(not view.reasoning_shown)

    def action_fork(self) -> None:
        message = self.target()
        if message is None:
            return
        if message.role == "user":
            self.notify("Fork after a reply (select one with Ctrl+Up); to change this message, edit it (F2).")
            return
        self.set_mode(InputMode("fork", message.id))
        self.chat_input.focus()

    async def action_rewind(self) -> None:
        selected = self.conversation_view.selected_id
        if selected is None:
            self.notify("Select the message to go back to first (Ctrl+Up).")
            return

        async def rewind() -> None:
            await self.show_head(selected=self.controller.rewind(selected).id)
            self.status.set_note("rewound: the next message continues from here")

        await self.jobs.when_idle(rewind)

    async def action_delete_branch(self) -> None:
        # What the user is looking at when the key is pressed: the tree's cursor while the
        # tree has the focus, not the chat's selection hidden beside it.
        chosen = self.tree_panel.cursor_message_id if self.tree_has_focus() else None
        if self.tree_has_focus() and chosen is None:  # a line that stands for messages not drawn
            self.notify("Put the tree's cursor on a message to delete it and what follows it.")
            return
        # a reply being written stops and is counted
        await self.jobs.when_idle(lambda: self.ask_delete(chosen))

    def tree_has_focus(self) -> bool:
        focused = self.focused
        return focused is not None and self.tree_panel in focused.ancestors_with_self

    def ask_delete(self, chosen: int | None = None) -> None:
        """Ask about the branch below ``chosen`` (None: the chat's target), naming the
        message; delete exactly the messages counted.

        If another window or command changed that branch meanwhile, nothing is deleted:
        the refusal says so and the chat is shown as it is now (``Conversation``).
        """
        snapshot = self.controller.snapshot()
        message = self.target() if chosen is None else snapshot.message(chosen) if snapshot else None
        if message is None or snapshot is None:
            return
        counted = [message.id, *(m.id for m in snapshot.tree.descendants(message.id))]

        async def delete() -> None:
            count = self.controller.delete_subtree(message.id, expected_ids=counted)
            await self.show_head()
            self.notify(f"Deleted {chat_rules.plural(count, 'message')}.")

        async def confirmed(yes: bool | None) -> None:
            if yes:
                await self.jobs.when_idle(delete)

        self.app.push_screen(ConfirmScreen(chat_rules.delete_question(message, len(counted))), confirmed)

    @on(MessageView.Clicked)
    async def message_clicked(self, event: MessageView.Clicked) -> None:
        """A click selects the message, as Ctrl+Up would reach it; on ``‹``/``›`` it pages too."""
        self.conversation_view.select(event.message_id)
        if event.page:
            await self.action_sibling(event.page)

    @on(TreePanel.NodeChosen)
    async def node_chosen(self, message: TreePanel.NodeChosen) -> None:
        async def choose() -> None:
            self.controller.select(message.message_id)
            await self.show_head(selected=message.message_id)
            await self.after_switch()

        self.chat_input.focus()  # the next thing typed is a message, not a tree move
        if self.controller.session_id is not None:
            await self.jobs.when_idle(choose)

    @on(TreePanel.NodeHighlighted)
    def node_highlighted(self, message: TreePanel.NodeHighlighted) -> None:
        self.switch_costs.request(message.message_id)

    def on_key(self, event: events.Key) -> None:
        """Text typed while a side panel has the focus goes to the message box, not nowhere."""
        if event.is_printable and event.character and event.character != " " and self.in_side_panel():
            event.stop()
            event.prevent_default()
            self.chat_input.focus()
            self.chat_input.insert(event.character)

    def action_stop(self) -> None:
        from_panel = self.in_side_panel()
        if from_panel:
            self.chat_input.focus()
        if self.jobs.running("generate", "warm"):
            self.controller.cancel()
        elif from_panel:
            return
        elif self.mode.kind != "send":
            self.set_mode(InputMode())
            self.status.set_note("")
        else:
            self.conversation_view.select(None)

    def action_copy_message(self) -> None:
        message = self.target()
        if message is not None:
            self.app.copy_to_clipboard(message.text)
            self.notify("Copied the message.", timeout=2)

    def action_copy_code(self) -> None:
        block = chat_rules.last_code_block(self.controller.snapshot(), self.conversation_view.selected_id)
        if block is None:
            self.notify("No code block to copy.", timeout=2)
            return
        self.app.copy_to_clipboard(block)
        self.notify("Copied the code block.", timeout=2)

    # -- sessions, models, panels ------------------------------------------------------------

    async def action_new_session(self) -> None:
        await self.jobs.when_idle(self.new_chat)

    def action_open_session(self) -> None:
        async def chosen(choice: Picked | None) -> None:
            if choice is not None:
                await self.jobs.when_idle(lambda: self.open_chat(choice.session_id, message_id=choice.message_id))

        self.app.push_screen(SessionPicker(self.controller.library, current_id=self.controller.session_id), chosen)

    @on(SessionList.SessionChosen)
    async def session_chosen(self, message: SessionList.SessionChosen) -> None:
        self.chat_input.focus()
        await self.jobs.when_idle(lambda: self.open_chat(message.session_id))

    def action_rename_session(self) -> None:
        snapshot = self.controller.snapshot()
        if snapshot is None:
            return

        async def renamed(title: str | None) -> None:
            if title is not None and title.strip():
                try:
                    self.controller.rename_session(title.strip())
                except GESTURE_ERRORS as error:
                    self.refused(str(error))
                    return
                await self.refresh_view()

        self.app.push_screen(TextPrompt("Rename this chat", snapshot.title), renamed)

    def action_export(self) -> None:
        session_id = self.controller.session_id
        if session_id is None:
            self.notify("This chat has no messages yet: there is nothing to export.", timeout=3)
            return

        def exported(path: Path | None) -> None:
            if path is not None:
                self.notify(f"Exported to {path}", markup=False)

        self.app.push_screen(ExportScreen(self.controller, session_id), exported)

    def action_switch_model(self) -> None:
        self.choose_model()

    def action_chat_settings(self) -> None:
        settings_flow.open_chat_settings(self)

    def action_delete_session(self) -> None:
        library_flow.delete_chat(self)

    def action_import_sessions(self) -> None:
        library_flow.import_chats(self)

    def toggle_panel(self, panel: TreePanel | SessionList) -> None:
        panel.toggle_class("-open")
        self.refresh_panels()
        if panel.has_class("-open"):
            panel.focus()
        else:
            self.chat_input.focus()

    def action_toggle_tree(self) -> None:
        self.toggle_panel(self.tree_panel)

    def action_toggle_sessions(self) -> None:
        self.toggle_panel(self.session_list)
