"""The branch under the tree's cursor, read into RAM while the user looks at it.

When the cursor rests on a message for a moment (``REST_SECONDS``: a timer started again
by every move), the controller reads what going there would restore from disk into the
checkpoint store's RAM tier (``BranchRoutes.warm_ahead``), in a thread worker; the
live context is never touched. Moving on, or starting any engine job, stops it between
two checkpoints (a job also forgets the message). Once it has read something the tree's
marks are read again (the message turns ●) and so is the cost line: going there is a copy
from RAM now.

Paging versions (Alt+←/→) rests on the version the next page in the same direction
would show: it is warmed once the page's own switch has ended (``again``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from textual.dom import DOMNode
from textual.timer import Timer

from sessions.api.chat import SessionController, WarmedAhead
from sessions.errors import LlamachatError

REST_SECONDS = 0.4
"""How long the cursor stays on a message before its branch is warmed: long enough that
running down the tree reads nothing, short enough to be done before a choice."""


class WarmAhead:
    """Warms the branch under the cursor once the cursor rests, in the worker group
    ``warm-ahead`` (one at a time)."""

    def __init__(self, node: DOMNode, controller: SessionController,
                 done: Callable[[WarmedAhead | None], None]) -> None:
        """``done`` runs on the UI thread when a warm has ended (None: it did not run)."""
        self._node = node
        self._controller = controller
        self._done = done
        self._timer: Timer | None = None
        self._wanted: int | None = None
        self._stop = threading.Event()
        """The stop of the warm under way (each warm has its own)."""
        self._warmed: int | None = None
        """The message whose warm last ran to its end."""
        self._paged = False
        """The message wanted is the one a page of versions points to."""

    @property
    def resting_on(self) -> int | None:
        """The message whose rest is being timed (None: no timer runs)."""
        return self._wanted if self._timer is not None else None

    def rest_on(self, message_id: int, *, page: bool = False) -> None:
        """The cursor came onto ``message_id`` (or a page of versions points there, with
        ``page``): stop a warm under way, and warm this one if nothing has moved on in
        ``REST_SECONDS``.

        The cursor on the head asks for nothing (its branch is live), and leaves a rest a
        page asked for alone: the cursor follows the head a page has just moved."""
        if not page and self._is_head(message_id):
            if not self._paged:
                self.leave()
            return
        self.stop()
        self._wanted, self._paged = message_id, page
        self._timer = self._node.set_timer(REST_SECONDS, self.rested, name="warm-ahead")

    def _is_head(self, message_id: int) -> bool:
        try:
            snapshot = self._controller.snapshot()
        except LlamachatError:
            return False
        return snapshot is not None and snapshot.head is not None and snapshot.head.id == message_id

    def again(self) -> None:
        """An engine job has ended: time the rest again on the message wanted, if the job
        stopped its warm or held the engine when it was due (a page's own switch does)."""
        if self._wanted is not None and self._wanted != self._warmed and self._timer is None:
            self.rest_on(self._wanted, page=self._paged)

    def leave(self) -> None:
        """An engine job starts: stop, and forget the message (the job may make it live or
        change what going there reads; the next rest asks again)."""
        self.stop()
        self._wanted, self._paged = None, False

    def stop(self) -> None:
        """Stop the warm under way and the one waiting for its moment (any gesture)."""
        self._stop.set()
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def rested(self) -> None:
        """The cursor rested on the message: warm its branch (the timer's callback)."""
        if self._timer is not None:  # called before its time (the tests do)
            self._timer.stop()
        self._timer = None
        message_id = self._wanted
        if message_id is None or self._is_head(message_id):
            return  # the branch shown is live: nothing to read
        self._stop = stop = threading.Event()
        self._node.run_worker(lambda: self._warm(message_id, stop), thread=True, exclusive=True,
                              group="warm-ahead", exit_on_error=False,
                              description="reading the branch under the cursor into RAM")

    def _warm(self, message_id: int, stop: threading.Event) -> None:
        try:
            warmed = self._controller.routes.warm_ahead(message_id, stop.is_set)
        except LlamachatError:  # no model, a chat changed or unreadable: nothing to warm
            warmed = None
        self._node.app.call_from_thread(self._ended, message_id, warmed)

    def _ended(self, message_id: int, warmed: WarmedAhead | None) -> None:
        if warmed is not None and not warmed.stopped:
            self._warmed = message_id
        self._done(warmed)
