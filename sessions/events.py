"""What the core reports while it works, as plain past-tense dataclasses.

The controller calls a listener with these from whatever thread does the work; the
Textual app wraps each in a message and posts it to the UI thread, the ``ask`` command
prints them. The core never knows which.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sessions.tree import GenerationStats, Message


@dataclass(frozen=True)
class ModelLoadProgressed:
    fraction: float


@dataclass(frozen=True)
class ModelLoaded:
    name: str
    kind: str
    n_ctx: int
    seconds: float
    devices: str = ""
    """Where the layers run, when more than this machine's CPU (``CPU + 2 RPC (...)``)."""


@dataclass(frozen=True)
class PromptProgressed:
    done: int
    total: int
    tokens_per_second: float

    @property
    def eta_seconds(self) -> float:
        if self.tokens_per_second <= 0:
            return 0.0
        return max(0.0, (self.total - self.done) / self.tokens_per_second)


@dataclass(frozen=True)
class TextStreamed:
    text: str
    """Newly completed text of the reply being generated."""
    count: int = 0
    """Pieces of text streamed in this reply so far, this one included: one per token that
    completed text (a token that ends inside a character waits for the next)."""
    elapsed: float = 0.0
    """Seconds from the first piece of this reply to this one."""
    opens_in_reasoning: bool = False
    """The reply begins inside a reasoning block its prompt opened
    (``GenerationStats.opened_in_reasoning``), so its first text is reasoning."""
    context_used: int = 0
    """Tokens in the context with this piece, about: the branch the reply follows and one
    per piece so far (0: not known). The context meter follows the reply with it."""
    version: int | None = None
    """Which of several versions written at once (``SessionController.generate_versions``)
    the text belongs to, from 0; None: the one reply being written."""

    @property
    def tokens_per_second(self) -> float:
        """The reply's speed so far, measured as ``GenerationStats.generation_tps`` is."""
        return (self.count - 1) / self.elapsed if self.count > 1 and self.elapsed > 0 else 0.0


@dataclass(frozen=True)
class ReplyFinished:
    message: Message
    stats: GenerationStats
    tokens_kept: int = 0
    """Tokens of the branch already live in the context, used as they were (neither
    restored nor evaluated): the reuse the stats' restored and evaluated do not count."""


@dataclass(frozen=True)
class NoticeRaised:
    text: str
    level: str = "warning"
    """"info", "warning" or "error"."""


Event = ModelLoadProgressed | ModelLoaded | PromptProgressed | TextStreamed | ReplyFinished | NoticeRaised
Listener = Callable[[Event], None]


def ignore(_event: Event) -> None:
    """The listener used when nobody listens."""
