"""Blocking engine work in thread workers, one job at a time, never on the UI thread.

Loading a model, warming a branch, writing a reply and trimming a branch all drive the
same llama.cpp context. The controller's engine lock keeps two threads out of it (the
one rule, ``sessions.controller.job_control``); the screen keeps from piling jobs up
behind that lock: a job starts only when the engine is idle, and a gesture that changes
the branch while a job runs waits for it (``tui.gesture_queue``). Results and failures
come back to the screen as ``Worker.StateChanged`` messages.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.dom import DOMNode
from textual.worker import Worker

from sessions.api.chat import SessionController
from sessions.errors import ControllerError, DecodeCancelled, GenerationCancelled

if TYPE_CHECKING:
    from sessions.api.chat import Prepared, RoutePlan
    from sessions.sampling import SamplingSettings

ENGINE_GROUPS = frozenset({"load", "warm", "generate", "trim"})


@dataclass(frozen=True)
class Warmed:
    """A branch made live: what was estimated before, and what it took."""

    estimate_seconds: float
    result: Prepared


def describe_failure(group: str, error: BaseException) -> tuple[str, str] | None:
    """Plain words and a severity for a failed job; None when it needs no message."""
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
    """The engine jobs a screen runs."""

    def __init__(self, node: DOMNode, controller: SessionController,
                 before_job: Callable[[], None] = lambda: None) -> None:
        """``before_job``: stops what uses the engine besides jobs (a warm ahead), so that a
        job neither waits for it nor reads from disk beside it."""
        self._node = node
        """Runs the workers and gets their ``Worker.StateChanged`` messages."""
        self._before_job = before_job
        self._controller = controller

    # -- the jobs ---------------------------------------------------------------------

    def load(self, path: Path | None, *, demo: bool = False) -> None:
        """Load ``path`` (or make the demo model first, then load it)."""

        def job() -> object:
            model = self._controller.models.demo_model() if demo else path
            if model is None:
                raise ControllerError("no model was chosen")
            return self._controller.load_model(model)

        self._start("load", "loading the model", job)

    def reply(self, sampling: SamplingSettings | None = None) -> None:
        """Answer the question at the head (``sampling``: for this reply only)."""
        self._start("generate", "writing the reply", lambda: self._controller.generate_reply(sampling=sampling))

    def versions(self, count: int, shown: Callable[[], int]) -> None:
        """Answer the question at the head ``count`` times at once (``generate_versions``);
        ``shown``: the index of the version to end on, asked from the job's thread."""
        self._start("generate", f"writing {count} versions of the reply",
                    lambda: self._controller.generate_versions(count, shown=shown))

    def continue_reply(self, message_id: int) -> None:
        self._start("generate", "continuing the reply", lambda: self._controller.continue_reply(message_id))

    def continue_from(self, message_id: int, chars: int) -> None:
        self._start("generate", "continuing the reply from a place in it",
                    lambda: self._controller.continue_from(message_id, chars))

    def warm(self, leaf_id: int, on_plan: Callable[[RoutePlan], None]) -> None:
        """Make the branch ending at ``leaf_id`` live; ``on_plan`` hears its cost first (UI thread).

        Planning may tokenize a branch never seen by this model (a long imported chat), so
        it runs here too, not on the UI thread.
        """

        def job() -> Warmed:
            plan = self._controller.routes.plan_for(leaf_id)
            self._node.app.call_from_thread(on_plan, plan)
            return Warmed(plan.estimate_seconds, self._controller.warm(leaf_id))

        self._start("warm", "preparing the branch", job)

    def trim(self, leaf_id: int) -> None:
        self._start("trim", "making a branch without the oldest turns", lambda: self._controller.trim_to_fit(leaf_id))

    def _start(self, group: str, description: str, job: Callable[[], Any]) -> None:
        self._before_job()
        self._controller.begin_job()  # the engine is idle here: an old stop must not hit this job
        self._node.run_worker(job, thread=True, exclusive=True, group=group, exit_on_error=False,
                              description=description)

    # -- state ------------------------------------------------------------------------

    def owns(self, worker: Worker[Any]) -> bool:
        return worker.node is self._node and worker.group in ENGINE_GROUPS

    def running(self, *groups: str) -> list[Worker[Any]]:
        """Unfinished engine jobs (of ``groups`` when given)."""
        wanted = set(groups) or ENGINE_GROUPS
        return [w for w in self._node.app.workers
                if w.node is self._node and w.group in wanted and not w.is_finished]

    @property
    def generating(self) -> bool:
        return bool(self.running("generate"))

    @property
    def loading(self) -> bool:
        return bool(self.running("load"))

    @property
    def model_ready(self) -> bool:
        """A model is loaded, and no other is loading."""
        return self._controller.model_info is not None and not self.loading
