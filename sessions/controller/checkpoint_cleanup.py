"""Deleting a chat deletes the checkpoint files that only its branches reach.

The chat's tokens are read before it is deleted (they go with it). Once the deletion has
committed, a thread of its own finds, among the files in the chat's model folders, those
no other chat reaches (it reads the other chats that begin alike:
``sessions.checkpoints.owners``), deletes them and takes them off the checkpoint store's
index. The folder is read rather than the index, which lists only the files this process
wrote or has read: ``ask`` and an RPC model's engine process write there too. The
deletion itself never waits for this, and nothing here can fail it: a problem is a
warning, and the files it leaves are evicted in time like any other.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from sessions.checkpoints import remove_files
from sessions.checkpoints.owners import ChatTokens, ownership_on_disk
from sessions.store import SessionStore, StoreError

if TYPE_CHECKING:
    from sessions.checkpoints import CheckpointStore

log = logging.getLogger(__name__)


class CheckpointCleanup:
    """The removal of deleted chats' checkpoint files, for one session store and checkpoint store."""

    def __init__(self, store: SessionStore, checkpoints: CheckpointStore | None,
                 warn: Callable[[str], None]) -> None:
        self._store = store
        self._checkpoints = checkpoints
        self._warn = warn
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def read(self, session_id: int) -> ChatTokens | None:
        """What the chat's branches are made of, before it is deleted (None: nothing to clean)."""
        if self._checkpoints is None:
            return None
        try:
            return ChatTokens.read(self._store, session_id)
        except StoreError as error:  # the deletion reports its own problem with the store
            log.warning("could not read the tokens of session %s to delete its checkpoints: %s", session_id, error)
            return None

    def start(self, chat: ChatTokens) -> None:
        """Remove the chat's own files in the background (its deletion has committed)."""
        thread = threading.Thread(target=self._remove, args=(chat,), name="checkpoint-cleanup", daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the removals started so far; False if ``timeout`` ran out first."""
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout)
        return not any(thread.is_alive() for thread in threads)

    def _remove(self, chat: ChatTokens) -> None:
        checkpoints = self._checkpoints
        assert checkpoints is not None  # read() gave nothing to start without one
        try:
            checkpoints.flush()  # the chat's last files may still be on their way to the disk
            own = ownership_on_disk(self._store, [chat], checkpoints.directory).own
            removed = remove_files(own)
            checkpoints.forget(own)
        except Exception as error:  # never the deletion's failure: the files are a cache
            log.warning("could not delete the checkpoints of deleted session %s", chat.session_id, exc_info=True)
            self._warn(f"the checkpoint files of the deleted chat could not be removed ({error}); "
                       "they will be evicted as the disk budget needs room")
            return
        if removed.failures:
            more = f" (and {len(removed.failures) - 1} more)" if len(removed.failures) > 1 else ""
            self._warn(f"a checkpoint file of the deleted chat could not be removed: {removed.failures[0]}{more}")
