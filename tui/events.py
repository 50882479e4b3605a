"""The core's events as one Textual message, so they cross from worker threads safely.

The controller calls its listener from the thread doing the work; Textual widgets must
only be touched from the UI thread. ``post_message`` is thread-safe, so the listener
(``Forwarder``) wraps each core event (``sessions.events``) in a ``CoreEvent`` and posts
it to the screen, whose one handler then runs on the UI thread, in order. The events are
declared once, in the core; nothing here repeats their fields.

Model text is made inert here, at the boundary (every text field of the event itself;
stored messages are made inert where they are drawn), so nothing downstream can forget to.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, cast

from textual.message import Message
from textual.message_pump import MessagePump
from textual.notifications import SeverityLevel

from sessions import events as core
from tui.safe_text import inert

_SEVERITY: dict[str, SeverityLevel] = {"info": "information", "information": "information",
                                       "warning": "warning", "error": "error"}


def severity(level: str) -> SeverityLevel:
    """The Textual notification severity for a core notice level (unknown: a warning)."""
    return _SEVERITY.get(level, "warning")


def inert_event(event: core.Event) -> core.Event:
    """``event`` with each of its own text fields made inert."""
    changes = {f.name: inert(value) for f in dataclasses.fields(event)
               if isinstance(value := getattr(event, f.name), str)}
    return dataclasses.replace(cast(Any, event), **changes) if changes else event


class CoreEvent(Message):
    """Something the core reported (``event``, already made inert).

    A reply can stream hundreds of pieces a second; one message per piece would keep the
    UI thread busy (and holding the GIL the engine thread needs between tokens). So while
    a ``CoreEvent`` carrying streamed text waits in the queue, later text is merged into it
    (``merge``), and the UI takes everything collected when it handles the message.
    """

    def __init__(self, event: core.Event) -> None:
        super().__init__()
        self._event = event
        self._lock = threading.Lock()
        self._taken = False

    @property
    def event(self) -> core.Event:
        with self._lock:
            self._taken = True
            return inert_event(self._event)

    def merge(self, more: core.TextStreamed) -> bool:
        """Add streamed text to this message if it is text of the same version, still unread."""
        with self._lock:
            if self._taken or not isinstance(self._event, core.TextStreamed) or self._event.version != more.version:
                return False
            self._event = core.TextStreamed(self._event.text + more.text, more.count, more.elapsed,
                                            more.opens_in_reasoning, more.context_used, more.version)
            return True


class Forwarder:
    """A core listener that posts to whichever node is set as its target.

    The controller is built before any screen exists, so the target is filled in when the
    app creates its screen; events arriving before that are dropped (there is nothing to
    show them on yet).
    """

    def __init__(self) -> None:
        self.target: MessagePump | None = None
        self._lock = threading.Lock()
        self._texts: dict[int | None, CoreEvent] = {}
        """The last streamed-text message posted of each version being written (None: of
        the one reply), which more text of it may still join."""

    def __call__(self, event: core.Event) -> None:
        target = self.target
        if target is None:
            return
        with self._lock:
            if isinstance(event, core.TextStreamed):
                last = self._texts.get(event.version)
                if last is not None and last.merge(event):
                    return
                message = self._texts[event.version] = CoreEvent(event)
            else:
                message = CoreEvent(event)
                self._texts.clear()  # later text must not jump ahead of this
            target.post_message(message)
