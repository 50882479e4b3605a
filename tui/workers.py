"""Blocking engine work in thread workers, one job at a time, never on the UI thread.

Loading a model, warming a branch and writing a reply all drive the same llama.cpp
context, which must never be used by two threads at once. Textual's ``exclusive``
workers do not guarantee that for threads (cancelling a thread worker only abandons its
task; the thread runs on), so the screen starts a job only when the engine is idle
(``when_idle``), and each job also holds the app's engine lock while it runs. Results
and failures come back as ``Worker.StateChanged`` messages handled in one place.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.worker import Worker

from sessions.controller import ControllerError, GenerationCancelled, SessionController
from sessions.store import StoreError
from sessions.tree import Message, TreeError

if TYPE_CHECKING:
    from sessions.engine.branch_engine import PrepareResult

ENGINE_GROUPS = frozenset({"load", "warm", "generate", "trim"})
GESTURE_ERRORS = (ControllerError, StoreError, TreeError)
"""What the core raises, with a message written for the user, when a gesture cannot be done."""

IdleCallback = Callable[[], Awaitable[None] | None]


def describe_failure(group: str, error: BaseException) -> tuple[str, str] | None:
    """Plain words and a severity for a failed job; None when it needs no message."""
    from sessions.engine.context import DecodeCancelled

    if isinstance(error, GenerationCancelled):
        return "Stopped before the reply started.", "information"
    if isinstance(error, DecodeCancelled):
        return None  # a warm-up interrupted by the next gesture
    if isinstance(error, ControllerError):
        return str(error), "error"
    what = {"load": "Could not load the model", "warm": "Could not prepare this branch",
            "generate": "Could not write the reply",
            "trim": "Could not make the shorter branch"}.get(group, "Something failed")
    return f"{what}: {error}", "error"


class EngineWork:
    """Mixin for the chat screen: the engine jobs and the queue of what waits for them."""

    controller: SessionController
    _idle_callbacks: list[IdleCallback]
    """Set to an empty list by the screen's ``__init__``."""

    @property
    def _engine_lock(self) -> threading.Lock:
        return self.app.engine_lock  # type: ignore[attr-defined]

    # -- the jobs ---------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="load", exit_on_error=False, description="loading the model")
    def load_model_job(self, path: Path | None, demo: bool = False) -> object:
        """Load ``path`` (or make the demo model first, then load it)."""
        if demo:
            from sessions.synth import make_model

            path = make_model("llama", "tiny")
        assert path is not None
        with self._engine_lock:
            return self.controller.load_model(path)

    @work(thread=True, exclusive=True, group="generate", exit_on_error=False, description="writing the reply")
    def generate_job(self) -> Message:
        with self._engine_lock:
            return self.controller.generate_reply()

    @work(thread=True, exclusive=True, group="trim", exit_on_error=False,
          description="making a branch without the oldest turns")
    def trim_job(self, leaf_id: int) -> Message:
        with self._engine_lock:
            return self.controller.trim_to_fit(leaf_id)

    @work(thread=True, exclusive=True, group="warm", exit_on_error=False, description="preparing the branch")
    def warm_job(self, leaf_id: int) -> PrepareResult:
        with self._engine_lock:
            return self.controller.warm(leaf_id)

    # -- state ------------------------------------------------------------------------

    def engine_jobs(self, *groups: str) -> list[Worker]:
        """Unfinished engine jobs of this screen (of ``groups`` when given)."""
        wanted = set(groups) or ENGINE_GROUPS
        return [w for w in self.app.workers if w.node is self and w.group in wanted and not w.is_finished]

    @property
    def generating(self) -> bool:
        return bool(self.engine_jobs("generate"))

    @property
    def loading(self) -> bool:
        return bool(self.engine_jobs("load"))

    @property
    def model_ready(self) -> bool:
        return self.controller.engine is not None and not self.loading

    async def when_idle(self, callback: IdleCallback, *, stop: bool = True) -> None:
        """Run ``callback`` now if the engine is idle, else after the running job.

        With ``stop`` a reply being written or a branch being warmed is stopped first (a
        model load is never interrupted). The reply written so far is kept.
        """
        if not self.engine_jobs():
            await self._run_gesture(callback)
            return
        self._idle_callbacks.append(callback)
        if stop and self.engine_jobs("generate", "warm"):
            self.controller.cancel()

    async def run_idle_callbacks(self) -> None:
        """Called when an engine job ends: run what was waiting, in order."""
        while self._idle_callbacks and not self.engine_jobs():
            await self._run_gesture(self._idle_callbacks.pop(0))

    async def _run_gesture(self, callback: IdleCallback) -> None:
        """Run a gesture; a refusal from the core becomes a notification, not a crash."""
        try:
            result = callback()
            if inspect.isawaitable(result):
                await result
        except GESTURE_ERRORS as error:
            self.notify(str(error), severity="error", markup=False)  # type: ignore[attr-defined]
