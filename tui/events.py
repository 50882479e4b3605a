"""The core's events as Textual messages, so they cross from worker threads safely.

The controller calls its listener from the thread doing the work; Textual widgets must
only be touched from the UI thread. ``post_message`` is thread-safe, so the listener
(``Forwarder``) wraps each core event in one past-tense message class and posts it to the
screen, whose ``on_...`` handlers then run on the UI thread in order. Model text is made
inert here, at the boundary, so nothing downstream can forget to.
"""

from __future__ import annotations

import threading

from textual.message import Message
from textual.message_pump import MessagePump

from sessions import events as core
from tui.safe_text import inert


class ModelLoadProgressed(Message):
    """A fraction (0-1) of the model file has been read."""

    def __init__(self, fraction: float) -> None:
        super().__init__()
        self.fraction = fraction


class ModelLoaded(Message):
    """The model is ready; sending can start."""

    def __init__(self, event: core.ModelLoaded) -> None:
        super().__init__()
        self.name = inert(event.name)
        self.kind = event.kind
        self.n_ctx = event.n_ctx
        self.seconds = event.seconds


class PromptProgressed(Message):
    """Prompt tokens evaluated so far (before a reply, or while warming a branch)."""

    def __init__(self, event: core.PromptProgressed) -> None:
        super().__init__()
        self.done = event.done
        self.total = event.total
        self.tokens_per_second = event.tokens_per_second
        self.eta_seconds = event.eta_seconds


class TextBuffer:
    """Reply text from the worker thread, kept until the UI takes it.

    A reply can stream hundreds of pieces a second; one message per piece would keep the
    UI thread busy (and holding the GIL the engine thread needs between tokens). The
    forwarder posts one ``TextStreamed`` when the buffer goes from empty to non-empty,
    and its handler takes everything collected by then, so the UI does one update per
    frame it can draw, however fast the model writes.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: list[str] = []

    def add(self, text: str) -> bool:
        """Keep ``text``; True when the buffer was empty (a message must be posted)."""
        with self._lock:
            self._parts.append(text)
            return len(self._parts) == 1

    def take(self) -> str:
        with self._lock:
            text, self._parts = "".join(self._parts), []
        return text


class TextStreamed(Message):
    """More text of the reply being written; ``take`` returns it made inert."""

    def __init__(self, source: TextBuffer | str) -> None:
        super().__init__()
        self._source = source

    def take(self) -> str:
        source = self._source
        return inert(source.take() if isinstance(source, TextBuffer) else source)


class ReplyFinished(Message):
    """The reply is stored and is the new head of the branch."""

    def __init__(self, event: core.ReplyFinished) -> None:
        super().__init__()
        self.message = event.message
        self.stats = event.stats


class NoticeRaised(Message):
    """Something the user should read (a template fallback, a checkpoint problem)."""

    def __init__(self, text: str, level: str) -> None:
        super().__init__()
        self.text = inert(text)
        self.level = _SEVERITY.get(level, "warning")


_SEVERITY = {"info": "information", "information": "information", "warning": "warning", "error": "error"}
"""Core notice levels to Textual notification severities."""


def to_message(event: core.Event) -> Message | None:
    """The Textual message for a core event (None for an event this UI does not show)."""
    if isinstance(event, core.TextStreamed):
        return TextStreamed(event.text)
    if isinstance(event, core.PromptProgressed):
        return PromptProgressed(event)
    if isinstance(event, core.ModelLoadProgressed):
        return ModelLoadProgressed(event.fraction)
    if isinstance(event, core.ModelLoaded):
        return ModelLoaded(event)
    if isinstance(event, core.ReplyFinished):
        return ReplyFinished(event)
    if isinstance(event, core.NoticeRaised):
        return NoticeRaised(event.text, event.level)
    return None


class Forwarder:
    """A core listener that posts to whichever node is set as its target.

    The controller is built before any screen exists, so the target is filled in when the
    main screen mounts; events arriving before that are dropped (there is nothing to
    show them on yet).
    """

    def __init__(self) -> None:
        self.target: MessagePump | None = None
        self.text = TextBuffer()

    def __call__(self, event: core.Event) -> None:
        target = self.target
        if target is None:
            return
        if isinstance(event, core.TextStreamed):
            if self.text.add(event.text):
                target.post_message(TextStreamed(self.text))
            return
        message = to_message(event)
        if message is not None:
            target.post_message(message)

