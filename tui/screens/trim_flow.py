"""A branch that no longer fits the context: the offer to go on without its oldest turns.

Kept beside the chat screen, as ``library_flow`` is: it only asks the screen's controller,
dialogs and jobs, and the trim itself runs as an engine job (``EngineWork.trim``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from tui.screens import chat_rules
from tui.screens.dialogs import ConfirmScreen

if TYPE_CHECKING:
    from textual.app import App

    from sessions.api.chat import SessionController
    from sessions.errors import ContextOverflow
    from tui.engine_work import EngineWork
    from tui.gesture_queue import GestureQueue
    from tui.widgets.status_bar import StatusBar


class TrimHost(Protocol):
    """What the flow needs of the chat screen (which imports this module, so it is not
    named here)."""

    @property
    def controller(self) -> SessionController: ...
    @property
    def jobs(self) -> EngineWork: ...
    @property
    def gestures(self) -> GestureQueue: ...
    @property
    def status(self) -> StatusBar: ...
    @property
    def app(self) -> App[Any]: ...
    def notify(self, message: str, *, severity: Any = ..., timeout: float | None = ..., markup: bool = ...) -> None: ...


def offer_trim(screen: TrimHost, error: ContextOverflow) -> None:
    """The branch no longer fits: offer to go on in a new branch without the oldest turns."""
    snapshot = screen.controller.snapshot()
    head = snapshot.head if snapshot is not None else None
    if snapshot is None or head is None or head.role != "user":
        return
    words, helps = chat_rules.trim_offer(snapshot, error)
    if not helps:
        screen.notify(words, severity="error", timeout=10, markup=False)
        return

    async def chosen(yes: bool | None) -> None:
        if yes:
            await screen.gestures.when_idle(lambda: start_trim(screen, head.id))

    screen.app.push_screen(ConfirmScreen(words, "Continue in a new branch", yes_variant="primary"), chosen)


def start_trim(screen: TrimHost, leaf_id: int) -> None:
    screen.status.set_note("making a branch without the oldest turns…")
    screen.jobs.trim(leaf_id)
