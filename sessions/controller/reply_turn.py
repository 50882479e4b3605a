"""Whose turn it is to write a reply in a session, across every llamachat process.

The head check of ``SessionStore.append_message`` keeps two processes from both writing
under the same head, but not from a subtler mix-up: one process stores a question and
starts answering it; another reads that question at the head, sees it waiting, and (by
the rule of ``sessions.turns``) joins its own text to it or answers it too. Two replies
for one question, and a user message taken over by another window.

So writing a reply in a session is a *turn*, held by one llamachat at a time: a lock on
``<db>.replies/<session id>.lock``, taken before the question is placed and let go once
its reply is stored (or has failed). ``llamachat ask`` waits for the turn (it queues);
the app, which must never block its screen, refuses the send in a sentence and keeps
what was typed. A question left waiting by a process that died or failed holds no turn,
so it is answered (or joined) as ``sessions.turns`` says.

The locks are ``flock`` locks on files of their own, one per session: they belong to one
open file, so two controllers in one process are two holders, as two processes would be,
and the kernel drops them when a process dies. Where no lock file can be made (a
read-only folder) there is nothing to coordinate: nothing can be written there either.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sessions.errors import TurnTaken

if TYPE_CHECKING:
    from sessions.controller.open_chat import OpenChat

WAIT_STEP = 0.05
"""Seconds between two tries while waiting for another process's turn to end."""


class ReplyTurns:
    """The turns one controller holds, by session id."""

    def __init__(self, db: Path) -> None:
        self.folder = db.with_name(db.name + ".replies")
        self._held: dict[int, int] = {}
        self._lock = threading.Lock()

    def holds(self, session_id: int) -> bool:
        with self._lock:
            return session_id in self._held

    def take(self, session_id: int, *, wait: bool = False, should_stop: Callable[[], bool] = lambda: False,
             on_wait: Callable[[], None] = lambda: None) -> bool:
        """Take the turn of ``session_id``; False if another holder has it (and ``wait`` is
        off, or ``should_stop`` said to give up). ``on_wait`` is called once, when waiting
        starts."""
        with self._lock:
            if session_id in self._held:
                return True
            fd = self._open(session_id)
            if fd is None:
                return True
        told = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not wait or should_stop():
                    os.close(fd)
                    return False
                if not told:
                    told = True
                    on_wait()
                time.sleep(WAIT_STEP)
        with self._lock:
            self._held[session_id] = fd
        return True

    @contextmanager
    def asking(self, session_id: int | None, needed: bool = True) -> Iterator[None]:
        """Around a gesture that leaves a question waiting for this process's reply.

        The turn is taken without waiting (``TurnTaken`` when another process has it:
        the gesture is refused, nothing written) and given back if the gesture fails;
        otherwise the reply that follows ends it. ``needed`` False: a gesture that asks
        nothing (an edit of a reply) passes through.
        """
        taken = needed and self._claim(session_id)
        try:
            yield
        except BaseException:
            if taken and session_id is not None:
                self.release(session_id)
            raise

    @contextmanager
    def replying(self, session_id: int | None) -> Iterator[None]:
        """Hold the turn while a reply is written and stored; the reply ends it."""
        self._claim(session_id)
        try:
            yield
        finally:
            self.release()

    def _claim(self, session_id: int | None) -> bool:
        """Take the turn without waiting; True when taken now (not held already)."""
        if session_id is None or self.holds(session_id):
            return False
        if not self.take(session_id):
            raise TurnTaken(session_id)
        return True

    def release(self, session_id: int | None = None) -> None:
        """Let go of the turn of ``session_id`` (None: of every session)."""
        with self._lock:
            ids = list(self._held) if session_id is None else [session_id]
            for key in ids:
                fd = self._held.pop(key, None)
                if fd is not None:
                    os.close(fd)  # closing the file lets go of its lock

    def _open(self, session_id: int) -> int | None:
        try:
            self.folder.mkdir(mode=0o700, exist_ok=True)
            return os.open(self.folder / f"{session_id}.lock",
                           os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError:
            return None


def take_turn(turns: ReplyTurns, chat: OpenChat, *, wait: bool, should_stop: Any, on_wait: Any) -> None:
    """Take the open chat's turn (``SessionController.take_turn``), then read the chat again."""
    with chat.lock:
        conversation = chat.conv()
    session_id = conversation.session_id
    if session_id is None:
        return
    if not turns.take(session_id, wait=wait, should_stop=should_stop, on_wait=on_wait):
        raise TurnTaken(session_id)
    with chat.lock:
        conversation.reload()
