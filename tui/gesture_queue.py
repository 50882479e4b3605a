"""Gestures that change the branch, run in order once the engine is idle.

A gesture that changes the branch (paging versions, regenerating, rewinding, opening
another chat, ...) applies to the branch the last engine job left, so it cannot run beside
a job (``tui.engine_work``): it waits here until the job has ended, after stopping a reply
being written or a branch being warmed (the reply written so far is kept as its own
version; a model load is never interrupted), and the gestures that waited run in the
order they were made. A gesture runs at once when no job runs, and it may start the next
job itself (a reply, a warm-up).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from sessions.api.chat import SessionController
from sessions.errors import LlamachatError
from tui.engine_work import EngineWork

Gesture = Callable[[], Awaitable[None] | None]


class GestureQueue:
    """The gestures waiting for a screen's engine job to end."""

    def __init__(self, jobs: EngineWork, controller: SessionController, refused: Callable[[str], None]) -> None:
        """``refused``: shows a gesture the core refused (its message is written for the user)."""
        self._jobs = jobs
        self._controller = controller
        self._refused = refused
        self._waiting: list[Gesture] = []

    @property
    def waiting(self) -> bool:
        return bool(self._waiting)

    @property
    def idle(self) -> bool:
        """No job runs and no gesture waits for one."""
        return not self._jobs.running() and not self._waiting

    async def when_idle(self, gesture: Gesture, *, stop: bool = True) -> None:
        """Run ``gesture`` now if the engine is idle, else after the running job.

        With ``stop`` a reply being written or a branch being warmed is stopped first (a
        model load is never interrupted). The reply written so far is kept.
        """
        if not self._jobs.running():
            await self._run(gesture)
            return
        self._waiting.append(gesture)
        if stop and self._jobs.running("generate", "warm"):
            self._controller.cancel()

    async def run_waiting(self) -> None:
        """Called when an engine job ends: run what was waiting, in order, until one starts
        a job (the rest wait for that one)."""
        while self._waiting and not self._jobs.running():
            await self._run(self._waiting.pop(0))

    async def _run(self, gesture: Gesture) -> None:
        """Run a gesture; a refusal from the core becomes a notification, not a crash."""
        try:
            result = gesture()
            if inspect.isawaitable(result):
                await result
        except LlamachatError as error:  # the core's one root: its message is written for the user
            self._refused(str(error))
