"""The chat screen's foundation: the layout, what it shows, and the engine's jobs.

``ChatScreen`` shows the open chat as the controller (``sessions.controller``, the one
door into the core) has it, runs the blocking work as engine jobs (``tui.engine_work``)
and handles how they end (``Worker.StateChanged``) and what the core reports on the way
(``CoreEvent``). It also opens the first chat and loads its model. The keys and clicks
of the user are ``MainScreen``'s, built on this.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState

from sessions import events as core
from sessions.controller import ChatSnapshot, Config, ContextOverflow, SessionController, Tier
from tui.bindings import current_key, spec
from tui.engine_work import GESTURE_ERRORS, EngineWork, describe_failure
from tui.events import CoreEvent, severity
from tui.screens import chat_rules, trim_flow
from tui.screens.chat_rules import InputMode
from tui.screens.model_picker import ModelPicker
from tui.startup import StartupRequest, plan_startup
from tui.switch_cost import SwitchCosts
from tui.widgets.chat_input import ChatInput
from tui.widgets.conversation_view import ConversationView
from tui.widgets.prompt_progress import PromptProgress
from tui.widgets.session_list import SessionList
from tui.widgets.status_bar import StatusBar
from tui.widgets.tree_panel import TreePanel

if TYPE_CHECKING:
    from sessions.controller import Plan
    from tui.engine_work import Warmed

DEMO_NOTE = ("Demo model: its weights are random, so its replies are random text. "
             "It shows how branching works; press F5 to switch to a real model.")


class ChatScreen(Screen[None]):
    """Conversation in the centre, optional session list and tree, input, status."""

    CSS_PATH = "main_screen.tcss"
    AUTO_FOCUS = "#input"
    NARROW_BELOW = 68
    """Columns under which the side panels drop their minimum widths, which would crush the chat."""
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (NARROW_BELOW, "-wide")]

    def __init__(self, controller: SessionController, *, config: Config,
                 startup: StartupRequest = StartupRequest()) -> None:
        super().__init__()
        self.controller = controller
        self.config = config
        self.startup = startup
        self.mode = InputMode()
        self.reply_wanted = False
        """A user message waits for the model to finish loading."""
        self._tiers: dict[int, Tier | None] = {}
        """The saved-state marks last read: kept while a job runs (see ``read_tiers``)."""
        self.jobs = EngineWork(self, controller, refused=self.refused)
        self.switch_costs = SwitchCosts(self, controller, lambda words: self.tree_panel.show_cost(words))

    def compose(self) -> ComposeResult:
        with Horizontal(id="body"):
            yield SessionList(id="sessions", classes="side-panel")
            with Vertical(id="centre"):
                yield Static(Text(DEMO_NOTE), id="demo-banner")
                yield ConversationView(id="conversation")
                yield PromptProgress(id="progress")
                yield ChatInput(id="input")
            yield TreePanel(id="tree", classes="side-panel")
        yield StatusBar(id="status")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        keymap = getattr(self.app, "keymap", {})
        self.conversation_view.keys = {
            key_id: self.app.get_key_display(Binding(current_key(spec(key_id), keymap).split(",")[0], ""))
            for key_id in ("continue-reply", "toggle-reasoning")}
        self.watch(self.app, "app_focus", self.app_focus_changed, init=False)
        self.call_after_refresh(self.start)

    def app_focus_changed(self, focused: bool) -> None:
        """Back from another window, where the chat may have been renamed (``llamachat
        rename``): the title and the session list are read again. The messages are not:
        a reply may be streaming into the view."""
        if not focused:
            return
        try:
            snapshot = self.controller.snapshot()
        except GESTURE_ERRORS:  # unreadable now: the title shown stays
            return
        self.conversation_view.show_title(snapshot)
        self.refresh_panels(snapshot)

    @property
    def conversation_view(self) -> ConversationView:
        return self.query_one(ConversationView)

    @property
    def chat_input(self) -> ChatInput:
        return self.query_one(ChatInput)

    @property
    def status(self) -> StatusBar:
        return self.query_one(StatusBar)

    @property
    def progress(self) -> PromptProgress:
        return self.query_one(PromptProgress)

    @property
    def tree_panel(self) -> TreePanel:
        return self.query_one(TreePanel)

    @property
    def session_list(self) -> SessionList:
        return self.query_one(SessionList)

    @property
    def model_ready(self) -> bool:
        return self.controller.model_info is not None and not self.jobs.loading

    def in_side_panel(self) -> bool:
        """Whether the tree or the session list has the focus."""
        focused = self.focused
        return focused is not None and any(
            panel in focused.ancestors_with_self for panel in (self.tree_panel, self.session_list))

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
        shows. The context meter needs no such care: it says "not known" then.
        """
        try:
            snapshot = self.controller.snapshot()
        except GESTURE_ERRORS as error:
            self.notify(f"Could not read the chat: {error}", severity="error", markup=False)
            return
        await self.conversation_view.show_chat(snapshot)
        self.refresh_panels(snapshot)
        if not self.jobs.running():  # a job reports its own figures when it ends
            self.status.set_context(self.controller.context_used(), self.controller.n_ctx)

    def refresh_panels(self, snapshot: ChatSnapshot | None = None) -> None:
        """Redraw the open side panels (from ``snapshot`` when the caller has one); a panel
        whose contents the store cannot give now stays as it was."""
        try:
            snapshot = snapshot or self.controller.snapshot()
        except GESTURE_ERRORS:
            snapshot = None
        if self.tree_panel.has_class("-open") and snapshot is not None:
            head = snapshot.head
            self.tree_panel.show(snapshot.tree, {m.id for m in snapshot.path}, self._tiers,
                                 head.id if head else None)
        if self.session_list.has_class("-open"):
            try:
                sessions = self.controller.library.list_sessions()
            except GESTURE_ERRORS:
                return
            self.session_list.show(sessions, self.controller.session_id)

    @on(TreePanel.NodesBuilt)
    def read_tiers(self, message: TreePanel.NodesBuilt) -> None:
        """Read where the states of the messages the tree built are kept, in a worker (the
        store and the checkpoint index are read), and only while no engine job runs: with
        the engine in another process the question would wait for the whole job. Meanwhile
        the marks last read stay; the end of a job draws the tree again, and asks again."""
        if self.jobs.running() or not message.message_ids:
            return
        panel, ids = self.tree_panel, message.message_ids

        def read() -> None:
            tiers = self.controller.checkpoint_tiers(ids)
            self.app.call_from_thread(self.tiers_read, panel, tiers)

        self.run_worker(read, thread=True, group="tiers", exit_on_error=False,
                        description="reading where the saved states are")

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

    # -- the core's events and the end of every engine job -------------------------------

    @on(CoreEvent)
    async def core_event(self, message: CoreEvent) -> None:
        match message.event:
            case core.ModelLoadProgressed(fraction):
                self.progress.show_fraction(f"loading the model: {fraction:.0%}", fraction)
            case core.ModelLoaded(name, kind, n_ctx, _seconds, devices):
                # Heard before the controller holds the model: its template and the branch's
                # tokens are shown when the load job ends (``show_loaded_model``).
                self.status.set_model(name, kind, devices)
                self.status.set_context(None, n_ctx)
                self.progress.hide()
            case core.PromptProgressed(done, total) as progress if 0 < total and done < total:
                self.progress.show_prompt(done, total, progress.eta_seconds)
            case core.PromptProgressed():
                self.progress.hide()
            case core.TextStreamed(text) as streamed:
                self.progress.hide()
                self.conversation_view.append_text(text, opens_in_reasoning=streamed.opens_in_reasoning)
                if streamed.tokens_per_second:
                    self.status.set_speed(streamed.tokens_per_second, streaming=True)
                if streamed.context_used:  # the meter follows the reply, not "?" until it is stored
                    self.status.set_context(streamed.context_used, self.controller.n_ctx)
            case core.ReplyFinished(reply, stats, kept):
                await self.conversation_view.finish_stream(reply)
                self.status.set_speed(stats.generation_tps)
                self.status.set_cost(stats.tokens_restored, stats.tokens_evaluated, stats.prompt_seconds, kept=kept)
                await self.refresh_view()
                self.status.set_context(self.controller.context_used(), self.controller.n_ctx)
            case core.NoticeRaised(text, level):
                self.notify(text, severity=severity(level), markup=False)

    @on(Worker.StateChanged)
    async def job_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if not self.jobs.owns(worker):
            return
        if event.state == WorkerState.RUNNING and worker.group == "load" and not self.progress.active:
            self.progress.show_fraction(f"{worker.description}…", None)
        if not worker.is_finished:
            return
        if event.state == WorkerState.SUCCESS:
            await self.job_succeeded(worker.group, worker.result)
        else:
            await self.job_failed(worker.group, worker.error)
        if not self.jobs.running():
            self.progress.hide()
        await self.jobs.run_waiting()
        if not self.jobs.running() and self.tree_panel.has_class("-open"):
            self.refresh_panels()  # the saved marks, not read while the job ran
            self.switch_costs.refresh()

    async def job_succeeded(self, group: str, result: Any) -> None:
        if group == "load":
            self.status.set_note("")
            self.show_loaded_model()
            if self.reply_wanted:
                self.reply_wanted = False
                await self.start_reply()
            elif not self.jobs.gestures_waiting:
                await self.after_switch()
        elif group == "trim":
            self.conversation_view.select(None)
            await self.refresh_view()
            self.status.set_note("continued in a new branch without the oldest turns")
            await self.start_reply()
        elif group == "warm":
            warmed = cast("Warmed", result)
            done = warmed.result
            self.status.set_cost(done.tokens_restored, done.tokens_evaluated, done.seconds, warmed.estimate_seconds,
                                 kept=done.plan.keep)
            self.status.set_context(done.plan.target_len, self.controller.n_ctx)
            self.status.set_note("")

    async def job_failed(self, group: str, error: BaseException | None) -> None:
        if group == "generate":
            await self.conversation_view.drop_reply()
            await self.refresh_view()
            if isinstance(error, ContextOverflow):
                trim_flow.offer_trim(self, error)
                return
        if group == "load":
            if self.reply_wanted:  # no reply follows now: give back the turn the send took
                self.reply_wanted = False
                self.controller.end_turn()
            if self.controller.model_info is None:
                self.status.set_model("no model")
            else:  # the model loaded before is back
                self.show_loaded_model()
        if group == "trim":
            self.status.set_note("")
            await self.refresh_view()  # a branch refused because the chat changed elsewhere
        words = describe_failure(group, error) if error is not None else None
        if words is not None:
            self.notify(words[0], severity=severity(words[1]), markup=False)

    # -- replies and branch switches ---------------------------------------------------------

    async def show_head(self, mode: InputMode | None = None, selected: int | None = None) -> None:
        """After a gesture: select ``selected`` (None: nothing), reset the input mode, redraw.

        The note of the gesture before is about a chat that has just changed: it goes.
        """
        if mode is not None:
            self.set_mode(mode)
        self.status.set_note("")
        self.conversation_view.select(selected)
        await self.refresh_view()

    async def start_reply(self) -> None:
        """Write a reply to the user message at the head (once the model is loaded)."""
        if not self.model_ready:
            self.reply_wanted = True
            if self.jobs.loading:
                self.notify("The reply will start once the model has loaded.", timeout=3)
            else:
                self.controller.end_turn()  # another window or command may answer meanwhile
                self.notify("No model is loaded: press F5 to choose one.", severity="warning")
            return
        self.status.set_speed(None)  # the speed shown from here is this reply's
        await self.conversation_view.begin_reply()
        self.jobs.reply()

    async def after_switch(self) -> None:
        """After the branch changed: say what making it live costs, then do it in the background."""
        snapshot = self.controller.snapshot()
        head = snapshot.head if snapshot is not None else None
        if not self.model_ready or head is None or self.jobs.running():
            return

        def planned(plan: Plan) -> None:
            note = chat_rules.switch_note(plan)
            if note:
                self.status.set_note(note)
                self.notify(note, timeout=4)

        self.jobs.warm(head.id, planned)

    # -- the first chat, and models ----------------------------------------------------------

    async def start(self) -> None:
        """What the app opens first (see ``tui.startup``); the model loads behind the screen."""
        try:
            last_session_id = self.controller.library.last_session_id()
        except GESTURE_ERRORS as error:  # a damaged or replaced database: start as if it held no chat
            self.notify(f"Could not read the saved chats: {error}", severity="error", markup=False)
            last_session_id = None
        plan = plan_startup(self.startup, last_session_id=last_session_id, configured_model=self.config.model)
        if plan.start == "demo":
            await self.new_chat()
            self.show_demo_banner(True)
            self.progress.show_fraction("making the demo model (random weights, made once)…", None)
            self.jobs.load(None, demo=True)
        elif plan.start == "new":
            await self.new_chat()
            self.jobs.load(plan.model_path)
        elif plan.start == "open" and plan.session_id is not None:
            await self.open_chat(plan.session_id, model_path=plan.model_path)
        else:
            self.choose_model()

    async def new_chat(self) -> None:
        self.reply_wanted = False  # a message waiting in the chat left waits no more (its turn went too)
        self.controller.new_session(system_prompt=self.config.system_prompt)
        await self.show_head(InputMode())
        self.chat_input.focus()

    async def open_chat(self, session_id: int, *, model_path: Path | None = None,
                        message_id: int | None = None) -> None:
        """Show a stored session; load its model (or ``model_path``) when another one is loaded.

        With ``message_id`` the branch holding that message is shown, the message selected.
        """
        try:
            session = self.controller.open_session(session_id)
            if message_id is not None:
                self.controller.select(message_id)
        except GESTURE_ERRORS as error:
            self.refused(str(error))
            return
        self.reply_wanted = False  # a message waiting in the chat left waits no more (its turn went too)
        await self.show_head(InputMode(), selected=message_id)
        wanted = model_path or self.controller.models.model_to_reopen(session.model_to_reopen, self.config.model)
        info = self.controller.model_info
        if info is not None and (wanted is None or Path(info.path) == wanted):
            try:
                self.controller.keep_model_for_chat()
            except GESTURE_ERRORS as error:  # the chat is shown; only its record of the model failed
                self.notify(str(error), severity="error", markup=False)
            await self.after_switch()
        elif wanted is not None:
            self.jobs.load(wanted)
        else:
            self.notify(chat_rules.no_model_note(session), severity="warning", markup=False)
            self.choose_model()

    def choose_model(self) -> None:
        async def chosen(path: Path | None) -> None:
            if path is not None:
                await self.jobs.when_idle(lambda: self.switch_to_model(Path(path)))
            elif self.controller.model_info is None:
                self.status.set_note("no model loaded: press F5 to choose one")

        info = self.controller.model_info
        loaded = Path(info.path) if info is not None else None
        self.app.push_screen(ModelPicker(self.controller.models, self.config, loaded=loaded), chosen)

    async def switch_to_model(self, path: Path) -> None:
        if self.controller.snapshot() is None:
            await self.new_chat()
        self.show_demo_banner(False)
        self.jobs.load(path)

    def show_demo_banner(self, shown: bool) -> None:
        self.query_one("#demo-banner").set_class(shown, "-visible")
