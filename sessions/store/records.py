"""The values the store hands out: frozen snapshots of rows, never live objects.

Callers get immutable copies so nothing can change a session behind the store's back;
to change something they call the store, which commits before returning.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sessions.sampling import SamplingSettings
from sessions.store.errors import DatabaseDamaged
from sessions.tree import GenerationStats, Message

TITLE_LENGTH = 60
"""Longest title taken from the first user message."""

T = TypeVar("T")


@dataclass(frozen=True)
class Session:
    """One conversation's settings and where its active branch ends."""

    id: int
    title: str
    created_at: float
    updated_at: float
    model_path: str | None
    model_fingerprint: str | None
    system_prompt: str | None
    sampling: SamplingSettings
    active_leaf_id: int | None
    served: bool = False
    """Kept by ``llamachat serve`` for a conversation its clients send (``sessions.serve``)."""

    @property
    def model_to_reopen(self) -> str | None:
        """The model to reopen the chat with unasked: its own, if llamachat loaded it for the
        chat (loading records the model's fingerprint with its path).

        An imported chat keeps the path its file named, to show, but no fingerprint: a
        path that came from a file (a model that may crash llama.cpp, or one that was
        never there) is loaded only once the user chooses it.
        """
        return self.model_path if self.model_fingerprint else None


@dataclass(frozen=True)
class NewMessage:
    """A message to add with others in one go (``SessionStore.add_messages``)."""

    parent: int | None
    """The position of its parent among the messages added with it (None: the top level)."""
    role: str
    text: str
    stats: GenerationStats | None = None
    created_at: float | None = None
    """Unix seconds; None: now."""


@dataclass(frozen=True)
class SessionSummary:
    """What the session list shows, without loading any messages."""

    id: int
    title: str
    updated_at: float
    message_count: int
    served: bool = False
    """A chat ``llamachat serve`` keeps for its clients."""


@dataclass(frozen=True)
class SearchHit:
    """One search result: a message (or, with ``message_id`` None, a session title)."""

    session_id: int
    message_id: int | None
    title: str
    snippet: str


def title_from_text(text: str, limit: int = TITLE_LENGTH) -> str:
    """The first non-blank line, cut at a word boundary near ``limit`` characters."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0].rstrip(" ,.;:")
    if len(cut) < limit // 2:
        cut = line[:limit]
    return cut + "…"


def session_from_row(row: sqlite3.Row) -> Session:
    return Session(
        id=row["id"],
        title=row["title"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        model_path=row["model_path"],
        model_fingerprint=row["model_fingerprint"],
        system_prompt=row["system_prompt"],
        sampling=_decoded(row["sampling"] or "{}", SamplingSettings.from_dict,
                          f"the sampling settings of session {row['id']}"),
        active_leaf_id=row["active_leaf_id"],
        served=bool(row["served"]) if "served" in row.keys() else False,  # a read-only file of an older schema
    )


def message_from_row(row: sqlite3.Row) -> Message:
    stats = row["stats"]
    return Message(
        id=row["id"],
        session_id=row["session_id"],
        parent_id=row["parent_id"],
        role=row["role"],
        text=row["text"],
        created_at=row["created_at"],
        stats=None if stats is None else _decoded(
            stats, GenerationStats.from_dict, f"the statistics of message {row['id']} (session {row['session_id']})"),
    )


def _decoded(stored: Any, build: Callable[[dict[str, Any]], T], what: str) -> T:
    """``build`` applied to the JSON object ``stored``; ``DatabaseDamaged`` saying ``what``
    is unreadable when it is not one, or holds values of the wrong kind.

    The store writes these columns itself, so anything else means the file was damaged or
    edited by hand. A plain ``ValueError`` would reach the front ends as a bug (and the
    app would meet it again at every start, reopening the last chat); this is the store's
    own error, one sentence a user can act on.
    """
    try:
        data = json.loads(stored)
        if not isinstance(data, dict):
            raise TypeError(f"a JSON {type(data).__name__} instead of an object")
        return build(data)
    except (ValueError, TypeError, OverflowError, RecursionError) as error:
        detail = str(error) or type(error).__name__
        raise DatabaseDamaged(f"the session database is damaged: {what} cannot be read ({detail}); "
                              "the other sessions are read as before", f"{what}: {detail}") from None


def stats_to_json(stats: GenerationStats | None) -> str | None:
    return None if stats is None else json.dumps(stats.to_dict())
