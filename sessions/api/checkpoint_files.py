"""The checkpoint folder as a whole, for a process that runs no checkpoint store.

``llamachat cache`` shows what the folder holds and clears it, ``llamachat models`` says
how much it takes, ``llamachat delete`` takes away the files only the deleted chats
reached. They work while the app may use the folder: files are only ever deleted, and
what the app then misses it recomputes (``sessions.checkpoints.listing``).

Counting costs two stats per file (no header is read). The use is the disk blocks the
files take (what a full disk counts), beside the bytes they hold: a file of 100 bytes
takes a block of 4 KB. Which files a chat owns is told from its stored tokens alone
(``sessions.checkpoints.owners``), reading the headers of its models' files only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from sessions.checkpoints import CheckpointFile, list_files, remove_files
from sessions.checkpoints.keys import model_folder
from sessions.checkpoints.owners import ChatTokens, Ownership, ownership_on_disk
from sessions.store import SessionNotFound, SessionStore


@dataclass
class FolderUsage:
    """Checkpoint files and bytes in a folder, and per model folder (largest first)."""

    count: int = 0
    nbytes: int = 0
    """Bytes the files hold."""
    on_disk: int = 0
    """Bytes of the disk blocks they take."""
    by_model: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Model folder name -> (files, bytes on disk)."""


@dataclass(frozen=True)
class ChatShare:
    """The files a chat's branches reach: its own, and those other chats reach too."""

    own_files: int
    own_bytes: int
    shared_files: int
    shared_bytes: int

    @classmethod
    def of(cls, ownership: Ownership) -> ChatShare:
        return cls(len(ownership.own), ownership.own_bytes, len(ownership.shared), ownership.shared_bytes)


@dataclass(frozen=True)
class Removed:
    """What deleting some files freed."""

    count: int
    nbytes: int
    failures: tuple[str, ...] = ()
    """One line per file that could not be deleted, saying why."""
    asked: int = 0
    """Files there were to delete."""


def folder_usage(folder: Path) -> FolderUsage:
    usage = FolderUsage()
    per_model: dict[str, list[int]] = {}
    for file in list_files(folder, headers=False):
        taken = allocated(file.path, file.size)
        usage.count += 1
        usage.nbytes += file.size
        usage.on_disk += taken
        totals = per_model.setdefault(file.model_folder, [0, 0])
        totals[0] += 1
        totals[1] += taken
    usage.by_model = {name: (count, nbytes) for name, (count, nbytes)
                      in sorted(per_model.items(), key=lambda item: -item[1][1])}
    return usage


def allocated(path: Path, size: int) -> int:
    """The bytes of the disk blocks ``path`` takes (``size`` where the system does not say)."""
    try:
        blocks = getattr(os.stat(path), "st_blocks", None)
    except OSError:
        return size
    return size if blocks is None else blocks * 512


def model_names(store: SessionStore) -> dict[str, str]:
    """Model folder name -> the model file last loaded with that fingerprint, as the saved
    chats recorded it."""
    return {model_folder(fingerprint): path for fingerprint, path in store.models_by_fingerprint().items()}


def chat_share(store: SessionStore, folder: Path, session_id: int) -> ChatShare:
    """What the branches of ``session_id`` reach in ``folder`` (``SessionNotFound``: no such chat)."""
    return ChatShare.of(_ownership(store, folder, session_id))


def clear_chat(store: SessionStore, folder: Path, session_id: int) -> tuple[Removed, ChatShare]:
    """Delete the files only ``session_id`` reaches; what was freed, and its share before."""
    ownership = _ownership(store, folder, session_id)
    return _removed(ownership.own), ChatShare.of(ownership)


def clear_all(folder: Path) -> Removed:
    """Delete every checkpoint file of ``folder``."""
    return _removed(list_files(folder, headers=False))


class ChatsGone:
    """Chats being deleted, as their checkpoint files know them: their tokens are read
    before the deletion (which takes them with it), their files deleted after it."""

    def __init__(self) -> None:
        self._chats: list[ChatTokens] = []

    def read(self, store: SessionStore, session_id: int) -> None:
        """Before ``session_id`` is deleted, in the deletion's transaction."""
        self._chats.append(ChatTokens.read(store, session_id))

    def remove_files(self, store: SessionStore, folder: Path) -> Removed:
        """Once the deletion has committed: the files no chat left reaches."""
        return _removed(ownership_on_disk(store, self._chats, folder).own)


def _ownership(store: SessionStore, folder: Path, session_id: int) -> Ownership:
    if not any(summary.id == session_id for summary in store.list_sessions()):
        raise SessionNotFound(session_id)
    return ownership_on_disk(store, [ChatTokens.read(store, session_id)], folder)


def _removed(files: list[CheckpointFile]) -> Removed:
    removed = remove_files(files)
    return Removed(removed.count, removed.nbytes, removed.failures, len(files))
