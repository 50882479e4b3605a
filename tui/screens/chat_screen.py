"""The chat screen: the layout, what it shows, and which flow each key and event goes to.

``ChatScreen`` shows the open chat as the controller (``sessions.api.chat``) has it. Its
behaviour is kept by subject in modules beside it, which take the screen as a
``chat_host.ChatHost``: the engine's jobs and what the core reports on the way
(``job_flow``), the first chat and the models (``opening_flow``), the gestures on the
messages (``tree_gestures``), the saved chats (``library_flow``), the chat's settings
(``settings_flow``) and the find in the chat (``find_flow``). A key's action and the
core's events go straight to their flow (the screen names it, and adds no step of its
own); the flows come back to the screen to show what changed (``show_head``,
``refresh_view``). Anything that changes the branch waits for the engine to be idle and
stops a reply being written first (``GestureQueue.when_idle``).
"""

from __future__ import annotations

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Static

from sessions.api.chat import ChatSnapshot, SessionController, Tier, WarmedAhead
from sessions.api.settings import Config, update_config
from sessions.errors import LlamachatError
from tui.bindings import bindings_for, current_key, spec
from tui.engine_work import EngineWork
from tui.gesture_queue import GestureQueue
from tui.screens import (
    attach_flow,
    chat_rules,
    find_flow,
    job_flow,
    library_flow,
    opening_flow,
    settings_flow,
    several_versions,
    tree_gestures,
)
from tui.screens.chat_rules import InputMode
from tui.startup import StartupRequest
from tui.switch_cost import SwitchCosts
from tui.warm_ahead import WarmAhead
from tui.widgets.chat_input import ChatInput
from tui.widgets.conversation_view import ConversationView
from tui.widgets.find_bar import FindBar
from tui.widgets.key_footer import KeyFooter
from tui.widgets.message_actions import MessageActions
from tui.widgets.message_view import MessageView
from tui.widgets.prompt_progress import PromptProgress
from tui.widgets.session_list import SessionList
from tui.widgets.status_bar import StatusBar
from tui.widgets.tree_panel import TreePanel

ACTION_KEYS = ("copy-message", "edit", "regenerate", "continue-reply", "delete-branch", "sibling-previous",
               "sibling-next")
"""The keys the actions of the selected message name in their tooltips."""
TITLE_CHECK_SECONDS = 2.0
"""How often the open chat's title is read again: ``llamachat rename`` in another shell
changes it, and a terminal does not always tell the app it was left (``app_focus``)."""
DEMO_NOTE = ("Demo model: its weights are random, so its replies are random text. "
             "It shows how branching works; press F5 to switch to a real model.")


class ChatScreen(Screen[None]):
    """Conversation in the centre, optional session list and tree, input, status; the keys
    are ``tui.bindings``'."""

    CSS_PATH = "chat_screen.tcss"
    AUTO_FOCUS = "#input"
    BINDINGS = bindings_for("screen")
    NARROW_BELOW = 68
    """Columns under which the side panels drop their minimum widths, which would crush the chat."""
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW_BELOW, "-wide")]

    def __init__(self, controller: SessionController, *, config: Config,
                 startup: StartupRequest = StartupRequest()) -> None:
        super().__init__()
        # The breakpoint class of the width the screen opens at, set before its first
        # resize: that resize would otherwise change it, and restyle every widget of the screen.
        width = self.app.size.width
        self.add_class(next(name for at, name in reversed(self.HORIZONTAL_BREAKPOINTS) if width >= at), update=False)
        self.controller = controller
        self.config = config
        self.startup = startup
        self.mode = InputMode()
        self.reply_wanted = False
        """A user message waits for the model to finish loading."""
        # The widgets the flows work on, made here and laid out in ``compose``.
        self.session_list = SessionList(id="sessions", classes="side-panel")
        self.conversation_view = ConversationView(id="conversation")
        self.progress = PromptProgress(id="progress")
        self.chat_input = ChatInput(id="input")
        self.tree_panel = TreePanel(id="tree", classes="side-panel")
        self.status = StatusBar(id="status")
        self._tiers: dict[int, Tier | None] = {}
        """The saved-state marks last read: kept while a job runs (see ``read_tiers``)."""
        self.warm_ahead = WarmAhead(self, controller, self.warmed_ahead)
        """Reads the branch under the tree's cursor into RAM once the cursor rests there."""
        self.jobs = EngineWork(self, controller, before_job=self.warm_ahead.leave)
        self.gestures = GestureQueue(self.jobs, controller, refused=self.refused)
        self.switch_costs = SwitchCosts(self, controller, lambda words: self.tree_panel.show_cost(words))
        self.finder = find_flow.Finder(self, FindBar(id="find"))
        self._typing_moved = False
        """Typing in a side panel has begun to go to the message box, whose focus is on its way."""

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            yield self.session_list
            with Vertical(id="centre"):
                yield Static(Text(DEMO_NOTE), id="demo-banner")
                yield self.conversation_view
                yield self.finder.bar
                yield self.progress
                yield self.chat_input
            yield self.tree_panel
        yield self.status
        yield KeyFooter()

    def on_mount(self) -> None:
        self.conversation_view.keys = {key_id: self.key_of(key_id)
                                       for key_id in ("continue-reply", "toggle-reasoning", *ACTION_KEYS)}
        self.conversation_view.actions_for = chat_rules.message_actions
        self.watch(self.app, "app_focus", self.app_focus_changed, init=False)
        self.set_interval(TITLE_CHECK_SECONDS, self.check_title)
        if self.config.tree_width is not None:
            self.tree_panel.want_width(self.config.tree_width)
        self.call_after_refresh(opening_flow.start, self)

    def on_unmount(self) -> None:
        self.warm_ahead.leave()  # the app ends: closing the model must not wait for a warm's reads

    def app_focus_changed(self, focused: bool) -> None:
        """Back from another window, where the chat may have been renamed (``llamachat
        rename``): the title and the session list are read again. The messages are not:
        a reply may be streaming into the view."""
        if not focused:
            return
        try:
            snapshot = self.controller.snapshot()
        except LlamachatError:  # unreadable now: the title shown stays
            return
        self.conversation_view.show_title(snapshot)
        self.refresh_panels(snapshot)

    def check_title(self) -> None:
        """Read the open chat's title in a worker; a new one is drawn, and the panels with it."""
        session_id = self.controller.session_id
        if session_id is None:
            return

        def read() -> None:
            try:
                title = self.controller.library.title_of(session_id)
            except LlamachatError:  # unreadable now, or deleted elsewhere: a gesture will say so
                return
            self.app.call_from_thread(self.title_read, session_id, title)

        self.run_worker(read, thread=True, exclusive=True, group="title", exit_on_error=False,
                        description="reading the chat's title")

    def title_read(self, session_id: int, title: str) -> None:
        view = self.conversation_view
        if session_id == self.controller.session_id and view.title_shown is not None and title != view.title_shown:
            view.show_title(self.controller.snapshot(), title)
            self.refresh_panels()

    def key_of(self, binding_id: str) -> str:
        """How the footer writes the key of ``binding_id`` now (the user's keymap applied)."""
        keymap = getattr(self.app, "keymap", {})
        return self.app.get_key_display(Binding(current_key(spec(binding_id), keymap).split(",")[0], ""))

    def in_side_panel(self) -> bool:
        """Whether the tree or the session list has the focus."""
        focused = self.focused
        return focused is not None and any(
            panel in focused.ancestors_with_self for panel in (self.tree_panel, self.session_list))

    def tree_has_focus(self) -> bool:
        focused = self.focused
        return focused is not None and self.tree_panel in focused.ancestors_with_self

    def refused(self, words: str) -> None:
        """A gesture the core refused: say why, and show the chat as the core has it now
        (a refusal because another window changed the chat leaves it read again)."""
        self.notify(words, severity="error", markup=False)
        self.call_later(self.refresh_view)

    # -- showing the chat ----------------------------------------------------------------

    async def refresh_view(self) -> None:
        """Show the active branch, the panels and the title as the controller has them.

        The chat's record is read from the store again (its title and settings may change
        elsewhere); when the store cannot give it, the screen says why and keeps what it
        shows. The context meter needs no such care: it says "not known" then. An edit or
        fork whose message is gone (deleted here or by another window) ends as Esc would
        end it, or every send would be refused.
        """
        try:
            snapshot = self.controller.snapshot()
        except LlamachatError as error:
            self.notify(f"Could not read the chat: {error}", severity="error", markup=False)
        else:
            await self.conversation_view.show_chat(snapshot)
            self.refresh_panels(snapshot)
            if self.finder.is_open:
                self.finder.refresh()
            if not self.jobs.running():  # a job reports its own figures when it ends
                self.status.set_context(self.controller.context_used(), self.controller.n_ctx)
        target_id = self.mode.target_id
        if target_id is None:
            return
        try:
            snapshot = self.controller.snapshot()
        except LlamachatError:  # unreadable now: the chat's view said so, and the mode stays
            return
        if snapshot is None or target_id not in snapshot.tree:
            self.set_mode(InputMode())
            self.status.set_note("")  # "what you were writing comes back after the edit": it has

    def refresh_panels(self, snapshot: ChatSnapshot | None = None) -> None:
        """Redraw the open side panels (from ``snapshot`` when the caller has one); a panel
        whose contents the store cannot give now stays as it was."""
        try:
            snapshot = snapshot or self.controller.snapshot()
        except LlamachatError:
            snapshot = None
        if self.tree_panel.has_class("-open") and snapshot is not None:
            head = snapshot.head
            self.tree_panel.show(snapshot.tree, {m.id for m in snapshot.path}, self._tiers,
                                 head.id if head else None)
        if self.session_list.has_class("-open"):
            try:
                sessions = self.controller.library.list_sessions()
            except LlamachatError:
                return
            self.session_list.show(sessions, self.controller.session_id)

    @on(TreePanel.NodesBuilt)
    def read_tiers(self, message: TreePanel.NodesBuilt) -> None:
        """Read where the states of the messages the tree built are kept, in a worker (the
        store and the checkpoint index are read). While a job holds the engine the
        controller does not say (``checkpoint_tiers``): the marks last read stay, and the
        end of the job draws the tree again, and asks again."""
        self.read_tiers_of(message.message_ids)

    def read_tiers_of(self, ids: list[int]) -> None:
        """Read the marks of ``ids`` in a worker (see ``read_tiers``)."""
        if not ids:
            return
        panel = self.tree_panel

        def read() -> None:
            tiers = self.controller.routes.checkpoint_tiers(ids)
            if tiers is not None:
                self.app.call_from_thread(self.tiers_read, panel, tiers)

        self.run_worker(read, thread=True, group="tiers", exit_on_error=False,
                        description="reading where the saved states are")

    def warmed_ahead(self, warmed: WarmedAhead | None) -> None:
        """A warm of the branch under the cursor ended (``WarmAhead``): the marks and the cost
        line are read again (what it read is in RAM now, and a read asked for while it held
        the engine was not answered)."""
        if self.tree_panel.has_class("-open"):
            self.read_tiers_of(self.tree_panel.built_ids)
            self.switch_costs.refresh()

    def tiers_read(self, panel: TreePanel, tiers: dict[int, Tier | None]) -> None:
        self._tiers.update(tiers)
        panel.set_tiers(tiers)

    def show_loaded_model(self) -> None:
        """The loaded model's chat template and how full its context is, once a load job has
        ended (``ModelLoaded`` is heard before the controller holds the model)."""
        self.status.set_template(self.controller.template_words)
        self.status.set_context(self.controller.context_used(), self.controller.n_ctx)

    def set_mode(self, mode: InputMode) -> None:
        """What the next send does. Leaving an edit (a send, Esc, another chat, its message
        deleted) takes the edited text out of the input and gives back the draft it replaced."""
        if self.mode.kind == "edit" and mode.kind != "edit":
            self.chat_input.clear()
            if self.mode.draft:
                self.chat_input.set_draft(self.mode.draft)
        self.mode = mode
        self.chat_input.set_class(mode.kind != "send", "-special")
        self.chat_input.border_title = mode.title

    async def show_head(self, mode: InputMode | None = None, selected: int | None = None) -> None:
        """After a gesture: select ``selected`` (None: nothing), reset the input mode, redraw.

        The note of the gesture before is about a chat that has just changed: it goes.
        """
        if mode is not None:
            self.set_mode(mode)
        self.status.set_note("")
        self.conversation_view.select(selected)
        await self.refresh_view()

    def show_demo_banner(self, shown: bool) -> None:
        self.query_one("#demo-banner").set_class(shown, "-visible")

    # -- the core's events and the end of every engine job ----------------------------------

    on_core_event = job_flow.core_event
    on_worker_state_changed = job_flow.job_changed

    # -- sending -------------------------------------------------------------------------

    @on(ChatInput.Submitted)
    async def submitted(self, event: ChatInput.Submitted) -> None:
        text = chat_rules.sent_text(event.text)
        if not text.strip():
            return
        if self.jobs.generating:
            self.notify("A reply is being written: press Esc to stop it, then send.", severity="warning")
            return
        try:
            before = self.controller.snapshot()
            if before is None:
                self.controller.new_session(system_prompt=self.config.system_prompt)
            if self.mode.kind == "edit" and self.mode.target_id is not None:
                message = self.controller.edit(self.mode.target_id, text)
            else:
                message = self.controller.send(text, parent_id=self.mode.target_id if self.mode.kind == "fork"
                                               else None)
        except LlamachatError as error:
            self.refused(str(error))
            return
        self.chat_input.clear()
        await self.show_head(InputMode())  # after an edit, the draft it replaced comes back
        if message.role == "user" and (message.text != text or before and message.id in before.tree):
            self.notify(chat_rules.joined_note(message, text), timeout=6)
        if message.role == "user":
            await (self.gestures.when_idle(lambda: job_flow.start_reply(self)) if self.jobs.model_ready
                   else job_flow.start_reply(self))

    # -- clicks, the panels and typing (the gestures themselves: ``tree_gestures``) --------

    @on(MessageView.Clicked)
    async def message_clicked(self, event: MessageView.Clicked) -> None:
        """A click selects the message, as Ctrl+Up would reach it; on ``‹``/``›`` it pages too."""
        self.conversation_view.select(event.message_id)
        if event.page:
            await tree_gestures.sibling(self, event.page)

    @on(MessageActions.Chosen)
    async def message_action_chosen(self, event: MessageActions.Chosen) -> None:
        """A click on an action of a message runs what its key runs, on that message (the
        chat's selection: the tree's cursor is not what the user pointed at)."""
        self.conversation_view.select(event.message_id)
        if self.in_side_panel():
            self.chat_input.focus()
        await self.run_action(event.action)

    @on(TreePanel.NodeChosen)
    async def node_chosen(self, message: TreePanel.NodeChosen) -> None:
        async def choose() -> None:
            self.controller.select(message.message_id)
            await self.show_head(selected=message.message_id)
            await job_flow.after_switch(self)

        self.chat_input.focus()  # the next thing typed is a message, not a tree move
        if self.controller.session_id is not None:
            await self.gestures.when_idle(choose)

    @on(FindBar.Changed)
    def find_changed(self, event: FindBar.Changed) -> None:
        self.finder.search(event.query)

    @on(FindBar.Stepped)
    async def find_stepped(self, event: FindBar.Stepped) -> None:
        await self.finder.step(event.delta, enter=event.enter)

    @on(FindBar.Closed)
    def find_closed(self) -> None:
        self.finder.close()

    @on(TreePanel.NodeHighlighted)
    def node_highlighted(self, message: TreePanel.NodeHighlighted) -> None:
        self.switch_costs.request(message.message_id)
        self.warm_ahead.rest_on(message.message_id)

    @on(SessionList.SessionChosen)
    async def session_chosen(self, message: SessionList.SessionChosen) -> None:
        self.chat_input.focus()
        await self.gestures.when_idle(lambda: opening_flow.open_chat(self, message.session_id))

    def on_key(self, event: events.Key) -> None:
        """Text typed while a side panel has the focus goes to the message box, not nowhere.
        An Alt or Ctrl key is not text, though a terminal sends Alt+S with its letter: it
        goes on to its binding (find, attach...). A space is the panel's, unless typing has
        begun to go to the message box: the keys a terminal delivers in one read all arrive
        before the focus does, and the space between two typed words is text."""
        typed = not event.key.startswith(("alt+", "ctrl+")) and not self._panel_key(event.key)
        if not (typed and event.is_printable and event.character and self.in_side_panel()):
            return
        if event.character == " " and not self._typing_moved:
            return
        event.stop()
        event.prevent_default()
        self._typing_moved = True
        self.chat_input.focus()
        self.chat_input.insert(event.character)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """The focus has landed (on the message box, or wherever a gesture put it since)."""
        self._typing_moved = False

    def _panel_key(self, key: str) -> bool:
        """Whether ``key`` is a key of the side panel focused (the tree's ``<`` and ``>``)."""
        bound = self.active_bindings.get(key)
        return bound is not None and bound.node in (self.tree_panel, self.session_list)

    @on(TreePanel.WidthChosen)
    def tree_width_chosen(self, event: TreePanel.WidthChosen) -> None:
        """Remember the tree's width in the config file, in a worker (a file write)."""
        self.config = self.config.with_(tree_width=event.columns)

        def save() -> None:
            try:
                update_config(tree_width=event.columns)
            except (LlamachatError, OSError) as error:
                words = getattr(error, "strerror", None) or str(error)
                self.app.call_from_thread(self.notify, f"The tree's width was not saved: {words}",
                                          severity="warning", markup=False)

        self.run_worker(save, thread=True, exclusive=True, group="remember-tree-width", exit_on_error=False,
                        description="saving the tree's width")

    def on_resize(self, event: events.Resize) -> None:
        self.tree_panel.fit_width(event.size.width)

    def toggle_panel(self, panel: TreePanel | SessionList) -> None:
        panel.toggle_class("-open")
        self.refresh_panels()
        if panel.has_class("-open"):
            panel.focus()
        else:
            self.chat_input.focus()

    # -- the keys' actions (``tui.bindings``): each goes straight to its flow ---------------

    action_select_message = tree_gestures.select_message
    action_sibling = tree_gestures.sibling
    action_edit = tree_gestures.edit
    action_regenerate = tree_gestures.regenerate
    action_regenerate_several = several_versions.ask_how_many
    action_continue_reply = tree_gestures.continue_reply
    action_continue_from = tree_gestures.continue_from
    action_fork = tree_gestures.fork
    action_rewind = tree_gestures.rewind
    action_delete_branch = tree_gestures.delete_branch
    action_stop = tree_gestures.stop
    action_copy_message = tree_gestures.copy_message
    action_copy_code = tree_gestures.copy_code
    action_open_session = library_flow.pick_chat
    action_rename_session = library_flow.rename_chat
    action_export = library_flow.export_chat
    action_switch_model = opening_flow.choose_model
    action_chat_settings = settings_flow.open_chat_settings
    action_delete_session = library_flow.delete_chat
    action_undo_delete = library_flow.undo_delete
    action_import_sessions = library_flow.import_chats
    action_attach_file = attach_flow.attach_file

    def action_toggle_reasoning(self) -> None:
        view = self.conversation_view
        view.set_reasoning_shown(not view.reasoning_shown)

    async def action_new_session(self) -> None:
        await self.gestures.when_idle(lambda: opening_flow.new_chat(self))

    @on(ChatInput.NothingToUndo)
    def input_has_nothing_to_undo(self) -> None:
        library_flow.undo_delete(self)

    def action_find(self) -> None:
        self.finder.open()

    def action_toggle_tree(self) -> None:
        self.toggle_panel(self.tree_panel)

    def action_toggle_sessions(self) -> None:
        self.toggle_panel(self.session_list)
