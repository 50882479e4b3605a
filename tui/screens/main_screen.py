"""The chat screen: layout, the core's events, and the end of every engine job.

Gestures live in two mixins (``ChatActions`` for the tree, ``SessionActions`` for
sessions, models and panels), the core's events in ``CoreEvents`` and the engine jobs
in ``EngineWork``; this file wires them to the widgets. The controller holds all chat logic;
the screen only decides what to show and when a job may start.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Static
from textual.worker import Worker, WorkerState

from sessions.config import Config
from sessions.controller import ContextOverflow, SessionController
from tui import events
from tui.bindings import bindings_for
from tui.safe_text import inert
from tui.screens.chat_actions import ChatActions, InputMode
from tui.screens.core_events import CoreEvents
from tui.screens.session_actions import SessionActions
from tui.startup import StartupRequest
from tui.widgets.chat_input import ChatInput
from tui.widgets.conversation_view import ConversationView
from tui.widgets.prompt_progress import PromptProgress
from tui.widgets.session_list import SessionList
from tui.widgets.status_bar import StatusBar
from tui.widgets.tree_panel import TreePanel
from tui.workers import ENGINE_GROUPS, GESTURE_ERRORS, EngineWork, describe_failure

DEMO_NOTE = ("Demo model: its weights are random, so its replies are random text. "
             "It shows how branching works; press F5 to switch to a real model.")


class MainScreen(CoreEvents, ChatActions, SessionActions, EngineWork, Screen[None]):
    """Conversation in the centre, optional session list and tree, input, status."""

    CSS_PATH = "main_screen.tcss"
    BINDINGS = bindings_for("screen")
    AUTO_FOCUS = "#input"

    def __init__(self, controller: SessionController, *, config: Config,
                 startup: StartupRequest = StartupRequest()) -> None:
        super().__init__()
        self.controller = controller
        self.config = config
        self.startup = startup
        self.mode = InputMode()
        self.reply_wanted = False
        """A user message waits for the model to finish loading."""
        self.n_ctx: int | None = None
        self.last_cost: tuple[int, int] | None = None
        """(restored, evaluated) of the last reply or branch switch."""
        self._idle_callbacks = []
        self._stream_source: events.TextStreamed | None = None
        self._stream_timer: Timer | None = None

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
        yield Footer()

    async def on_mount(self) -> None:
        self.app.forwarder.target = self  # type: ignore[attr-defined]
        self.call_after_refresh(self.start)

    # -- parts ------------------------------------------------------------------------

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

    # -- showing the conversation -------------------------------------------------------

    async def refresh_view(self) -> None:
        """Show the active branch, the panels and the title as the controller has them."""
        conversation = self.controller.conversation
        view = self.conversation_view
        if conversation is None:
            await view.show([], {})
            view.border_title = Text("no chat open")
            self.refresh_panels()
            return
        path = conversation.active_path()
        await view.show(path, {m.id: conversation.tree.sibling_index(m.id) for m in path})
        view.border_title = Text(inert(conversation.session.title) or "New chat")
        self.refresh_panels()

    def refresh_panels(self) -> None:
        conversation = self.controller.conversation
        tree = self.tree_panel
        if tree.has_class("-open") and conversation is not None:
            saved = getattr(self.controller, "saved_message_ids", lambda: set())()
            head = conversation.head
            tree.show(conversation.tree, {m.id for m in conversation.active_path()}, saved,
                      head.id if head else None)
        sessions = self.session_list
        if sessions.has_class("-open"):
            sessions.show(self.controller.store.list_sessions(),
                          conversation.session_id if conversation else None)

    def show_demo_banner(self, shown: bool) -> None:
        self.query_one("#demo-banner").set_class(shown, "-visible")

    def context_used(self) -> int | None:
        """Tokens of the active branch for the loaded model (None if not all known yet)."""
        engine, conversation = self.controller.engine, self.controller.conversation
        if engine is None or conversation is None:
            return None
        known = self.controller.store.session_tokens(conversation.session_id)
        total = 0
        for message in conversation.active_path():
            tokens = known.get(message.id, {}).get(engine.info.fingerprint)
            if tokens is None:
                return None
            total += len(tokens)
        return total

    # -- the end of every engine job ---------------------------------------------------

    @on(Worker.StateChanged)
    async def job_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if worker.node is not self or worker.group not in ENGINE_GROUPS:
            return
        if event.state == WorkerState.RUNNING and worker.group == "load" and not self.progress.active:
            self.progress.show_fraction(f"{worker.description}…", None)
        if not worker.is_finished:
            return
        if event.state == WorkerState.SUCCESS:
            await self.job_succeeded(worker.group, worker.result)
        else:
            await self.job_failed(worker.group, worker.error)
        if not self.engine_jobs():
            self.progress.hide()
        await self.run_idle_callbacks()

    async def job_succeeded(self, group: str, result: Any) -> None:
        if group == "load":
            self.status.set_note("")
            if self.reply_wanted:
                self.reply_wanted = False
                await self.start_reply()
            elif not self._idle_callbacks:
                await self.after_switch()
        elif group == "trim":
            await self.trimmed(result)
        elif group == "warm":
            self.last_cost = (result.tokens_restored, result.tokens_evaluated)
            self.status.set_cost(result.tokens_restored, result.tokens_evaluated, result.seconds)
            self.status.set_context(result.plan.target_len, self.n_ctx)
            self.status.set_note("")

    async def job_failed(self, group: str, error: BaseException | None) -> None:
        if group == "generate":
            self.drop_stream()
            await self.conversation_view.drop_reply()
            await self.refresh_view()
        if group == "load":
            self.reply_wanted = False
            if self.controller.engine is None:  # else the model loaded before is back
                self.status.set_model("no model")
        if group == "trim":
            self.status.set_note("")
        if group == "generate" and isinstance(error, ContextOverflow):
            self.offer_trim(error)
            return
        words = describe_failure(group, error) if error is not None else None
        if words is not None:
            self.notify(words[0], severity=words[1], markup=False)  # type: ignore[arg-type]

    # -- sending ------------------------------------------------------------------------

    @on(ChatInput.Submitted)
    async def submitted(self, event: ChatInput.Submitted) -> None:
        text = event.text
        if not text.strip():
            return
        if self.generating:
            self.notify("A reply is being written: press Esc to stop it, then send.", severity="warning")
            return
        mode = self.mode
        try:
            if self.controller.conversation is None:
                self.controller.new_session(system_prompt=self.config.system_prompt)
            if mode.kind == "edit" and mode.target_id is not None:
                message = self.controller.edit(mode.target_id, text)
            else:
                message = self.controller.send(text, parent_id=mode.target_id)
        except GESTURE_ERRORS as error:
            self.notify(str(error), severity="error", markup=False)
            return
        self.chat_input.clear()
        self.set_mode(InputMode())
        self.conversation_view.select(None)
        await self.refresh_view()
        if message.role == "user":
            await (self.when_idle(self.start_reply) if self.model_ready else self.start_reply())

    async def start_reply(self) -> None:
        """Write a reply to the user message at the head (once the model is loaded)."""
        if not self.model_ready:
            self.reply_wanted = True
            if self.loading:
                self.notify("The reply will start once the model has loaded.", timeout=3)
            else:
                self.notify("No model is loaded: press F5 to choose one.", severity="warning")
            return
        await self.conversation_view.begin_reply()
        self.controller.reset_cancel()  # the engine is idle here: an old stop must not hit this job
        self.generate_job()
