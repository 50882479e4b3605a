"""The loaded engine, lent to quick readers on any thread and closed only once none holds it.

Reads that never touch the context a job is using (tokenizing a file to attach, counting
the tokens of the branch shown, looking up which messages are checkpointed) run on the UI
thread or in workers, beside a reply. A model switch closes the old engine, freeing
llama.cpp's vocabulary and model: a reader still holding it would read freed memory. So
readers borrow the engine for the length of their read, and the switch takes it away
first, then waits for the borrowers to give it back before closing it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sessions.engine.protocol import ChatEngine


class EngineUsers:
    """Who reads the loaded engine outside a job, so that a switch closes it only when none does."""

    def __init__(self) -> None:
        self._gate = threading.Condition()
        self._users = 0
        self.engine: ChatEngine | None = None

    @contextmanager
    def borrowed(self) -> Iterator[ChatEngine | None]:
        """The engine loaded now (None: none), not closed until the block ends."""
        with self._gate:
            engine = self.engine
            if engine is not None:
                self._users += 1
        try:
            yield engine
        finally:
            if engine is not None:
                with self._gate:
                    self._users -= 1
                    self._gate.notify_all()

    def take(self) -> ChatEngine | None:
        """Take the engine away (no model while a switch runs); returns it once no reader
        holds it any more, free to close."""
        with self._gate:
            engine, self.engine = self.engine, None
            self._gate.wait_for(lambda: self._users == 0)
        return engine
