"""Gestures on sessions, models and panels, and the start-up sequence.

The screen appears first; the model loads in a worker behind it (progress in the status
line), so a large model never leaves the user looking at a blank terminal. The pickers,
dialogs and panels are their own widgets; this mixin only decides what happens with
what they return.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sessions.store import StoreError
from tui.screens.dialogs import ExportScreen, TextPrompt
from tui.screens.model_picker import ModelPicker
from tui.screens.session_picker import SessionPicker
from tui.startup import plan_startup, session_model
from tui.widgets.session_list import SessionList
from tui.widgets.tree_panel import TreePanel

if TYPE_CHECKING:
    from tui.screens.main_screen import MainScreen


class SessionActions:
    """Mixin of ``MainScreen``: sessions, models, panels, start-up."""

    # -- start-up --------------------------------------------------------------------------

    async def start(self: MainScreen) -> None:
        store = self.controller.store
        last = store.last_session()
        plan = plan_startup(self.startup, last_session_id=last.id if last else None,
                            configured_model=self.config.model)
        if plan.start == "demo":
            await self.new_chat()
            self.show_demo_banner(True)
            self.progress.show_fraction("making the demo model (random weights, made once)…", None)
            self.load_model_job(None, demo=True)
        elif plan.start == "new":
            await self.new_chat()
            self.load_model_job(plan.model_path)
        elif plan.start == "open" and plan.session_id is not None:
            await self.open_chat(plan.session_id)
        else:
            self.choose_model()

    # -- sessions ---------------------------------------------------------------------------

    async def new_chat(self: MainScreen) -> None:
        self.controller.new_session(system_prompt=self.config.system_prompt)
        self.conversation_view.select(None)
        self.set_mode_send()
        await self.refresh_view()

    def set_mode_send(self: MainScreen) -> None:
        from tui.screens.chat_actions import InputMode

        self.set_mode(InputMode())

    async def open_chat(self: MainScreen, session_id: int) -> None:
        """Show a stored session; load its model when another one (or none) is loaded."""
        try:
            session = self.controller.open_session(session_id)
        except StoreError as error:
            self.notify(str(error), severity="error", markup=False)
            return
        self.conversation_view.select(None)
        self.set_mode_send()
        await self.refresh_view()
        wanted = session_model(session.model_path, self.config.model)
        engine = self.controller.engine
        if engine is not None and (wanted is None or Path(engine.info.path) == wanted):
            await self.after_switch()
        elif wanted is not None:
            self.load_model_job(wanted)
        else:
            self.notify("The model of this chat is not on disk any more: choose one.", severity="warning")
            self.choose_model()

    async def action_new_session(self: MainScreen) -> None:
        await self.when_idle(self.new_chat)

    def action_open_session(self: MainScreen) -> None:
        conversation = self.controller.conversation

        async def chosen(session_id: int | None) -> None:
            if session_id is not None:
                await self.when_idle(lambda: self.open_chat(session_id))

        current = conversation.session_id if conversation else None
        self.app.push_screen(SessionPicker(self.controller.store, current_id=current), chosen)

    # Handlers by name: ``@on`` is only collected from Textual classes, not from mixins.
    async def on_session_list_session_chosen(self: MainScreen, message: SessionList.SessionChosen) -> None:
        await self.when_idle(lambda: self.open_chat(message.session_id))

    async def on_tree_panel_node_chosen(self: MainScreen, message: TreePanel.NodeChosen) -> None:
        async def choose() -> None:
            self.controller.conversation.select(message.message_id)
            self.conversation_view.select(message.message_id)
            await self.refresh_view()
            await self.after_switch()

        if self.controller.conversation is not None:
            await self.when_idle(choose)

    def action_rename_session(self: MainScreen) -> None:
        conversation = self.controller.conversation
        if conversation is None:
            return

        async def renamed(title: str | None) -> None:
            if title is not None and title.strip():
                self.controller.store.rename_session(conversation.session_id, title.strip())
                await self.refresh_view()

        self.app.push_screen(TextPrompt("Rename this chat", conversation.session.title), renamed)

    def action_export(self: MainScreen) -> None:
        conversation = self.controller.conversation
        if conversation is None:
            return
        def exported(path: Path | None) -> None:
            if path is not None:
                self.notify(f"Exported to {path}", markup=False)

        self.app.push_screen(ExportScreen(self.controller.store, conversation.session_id), exported)

    # -- models -----------------------------------------------------------------------------

    def choose_model(self: MainScreen) -> None:

        async def chosen(path: Path | None) -> None:
            if path is None:
                if self.controller.engine is None:
                    self.status.set_note("no model loaded: press F5 to choose one")
                return
            await self.when_idle(lambda: self.switch_to_model(Path(path)))

        self.app.push_screen(ModelPicker(self.config), chosen)

    async def switch_to_model(self: MainScreen, path: Path) -> None:
        if self.controller.conversation is None:
            await self.new_chat()
        self.show_demo_banner(False)
        self.load_model_job(path)

    def action_switch_model(self: MainScreen) -> None:
        self.choose_model()

    # -- panels -----------------------------------------------------------------------------

    def toggle_panel(self: MainScreen, panel: TreePanel | SessionList) -> None:
        panel.toggle_class("-open")
        self.refresh_panels()
        if panel.has_class("-open"):
            panel.focus()
        else:
            self.chat_input.focus()

    def action_toggle_tree(self: MainScreen) -> None:
        self.toggle_panel(self.tree_panel)

    def action_toggle_sessions(self: MainScreen) -> None:
        self.toggle_panel(self.session_list)
