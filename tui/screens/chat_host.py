"""What the chat screen's flows need of it, named without importing the screen.

``ChatScreen`` imports the modules that hold its behaviour by subject (``job_flow``,
``opening_flow``, ``tree_gestures``, ``library_flow``, ``settings_flow``); they take the
screen as a ``ChatHost``, so none of them imports the screen back. The type checker
checks that the screen is one wherever it hands itself over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.app import App
    from textual.widget import Widget

    from sessions.api.chat import ChatSnapshot, SessionController
    from sessions.api.settings import Config
    from tui.engine_work import EngineWork
    from tui.gesture_queue import GestureQueue
    from tui.screens.chat_rules import InputMode
    from tui.startup import StartupRequest
    from tui.switch_cost import SwitchCosts
    from tui.warm_ahead import WarmAhead
    from tui.widgets.chat_input import ChatInput
    from tui.widgets.conversation_view import ConversationView
    from tui.widgets.prompt_progress import PromptProgress
    from tui.widgets.session_list import SessionList
    from tui.widgets.status_bar import StatusBar
    from tui.widgets.tree_panel import TreePanel


class ChatHost(Protocol):
    """The chat screen as its flows see it (``tui.screens.chat_screen.ChatScreen``)."""

    controller: SessionController
    config: Config
    startup: StartupRequest
    jobs: EngineWork
    gestures: GestureQueue
    switch_costs: SwitchCosts
    warm_ahead: WarmAhead
    mode: InputMode
    reply_wanted: bool

    @property
    def app(self) -> App[Any]: ...
    @property
    def focused(self) -> Widget | None: ...
    @property
    def conversation_view(self) -> ConversationView: ...
    @property
    def chat_input(self) -> ChatInput: ...
    @property
    def status(self) -> StatusBar: ...
    @property
    def progress(self) -> PromptProgress: ...
    @property
    def tree_panel(self) -> TreePanel: ...
    @property
    def session_list(self) -> SessionList: ...

    def notify(self, message: str, *, title: str = ..., severity: Any = ..., timeout: float | None = ...,
               markup: bool = ...) -> None: ...
    def run_worker(self, work: Any, name: str | None = ..., group: str = ..., description: str = ...,
                   exit_on_error: bool = ..., start: bool = ..., exclusive: bool = ..., thread: bool = ...) -> Any: ...
    def call_later(self, callback: Any, *args: Any, **kwargs: Any) -> bool: ...

    def key_of(self, binding_id: str) -> str: ...
    def in_side_panel(self) -> bool: ...
    def tree_has_focus(self) -> bool: ...
    def refused(self, words: str) -> None: ...
    async def refresh_view(self) -> None: ...
    def refresh_panels(self, snapshot: ChatSnapshot | None = None) -> None: ...
    def show_loaded_model(self) -> None: ...
    def set_mode(self, mode: InputMode) -> None: ...
    async def show_head(self, mode: InputMode | None = None, selected: int | None = None) -> None: ...
    def show_demo_banner(self, shown: bool) -> None: ...
