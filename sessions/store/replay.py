"""After a recovery from the backup: repeat the user's deletions and put each head back.

The backup is older than the damage, so on its own it would bring back what the user
deleted since and leave each session's current message where it was when the backup was
taken; the next message would then branch silently from an old turn. ``salvage`` reads
the newer rows of the damaged file and calls these to finish the job: deletions recorded
after the backup (the ``deletions`` table) are done again, and each session's head is set
from the damaged file. Where a head cannot be had exactly (its message or its session row
could not be read) the session continues from the nearest message that could, and the
session is listed so the recovery notice can say so.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field

from sessions.store import lookups


@dataclass
class Deletions:
    """Deletions made after the backup and done again in the restored database."""

    sessions: int = 0
    messages: int = 0
    """Messages removed by them (a session's messages included)."""
    unknown: bool = False
    """Some deletions could not be read from the damaged file: deleted things may be back."""


@dataclass
class Undone:
    """What deletions undone after the backup had removed, brought back from the damaged file."""

    messages: int = 0
    session_ids: list[int] = field(default_factory=list)
    lost: int = 0
    """Their messages that the damaged file still names but that could not go back in."""
    unknown: bool = False
    """Some could not be read: an undone deletion may have stayed done."""


@dataclass
class Heads:
    """Sessions whose current message could not be restored exactly."""

    moved: list[tuple[int, int | None]] = field(default_factory=list)
    """(session, message it now ends at): its head's message was lost, an ancestor kept."""
    unreadable: list[tuple[int, int | None]] = field(default_factory=list)
    """(session, message it now ends at): the damaged file's session row could not be read."""


def repeat_deletion(conn: sqlite3.Connection, row: dict, done: Deletions) -> bool:
    """Do again one deletion read from the damaged file, and keep its record; False for a
    row that damage made meaningless (it counts as unreadable)."""
    kind, target = row.get("kind"), row.get("target")
    if kind not in ("session", "subtree") or not isinstance(target, int):
        return False
    if kind == "session":
        if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (target,)).fetchone():
            done.messages += lookups.delete_session(conn, target, record=False)
            done.sessions += 1
    elif kind == "subtree":
        found = conn.execute("SELECT session_id, parent_id FROM messages WHERE id = ?", (target,)).fetchone()
        if found is not None:
            done.messages += lookups.delete_subtree(conn, found[0], target, found[1], record=False)
    at = row.get("deleted_at")
    lookups.record_deletion(conn, kind, target, at if isinstance(at, (int, float)) else 0.0, row_id=row["id"])
    return True


def restore_head(src: sqlite3.Connection, dst: sqlite3.Connection, session_id: int, leaf: int | None,
                 messages: set[int], heads: Heads, note: Callable[[sqlite3.Error], None]) -> None:
    """Set the head the damaged file had; if its message is lost, the nearest ancestor kept."""
    step = leaf
    seen: set[int] = set()
    while step is not None and step not in messages and step not in seen:
        seen.add(step)
        try:
            row = src.execute("SELECT parent_id FROM messages WHERE id = ?", (step,)).fetchone()
        except sqlite3.DatabaseError as error:
            note(error)
            row = None
        step = row[0] if row is not None else None
    if step is None and leaf is not None:
        step = _newest(dst, session_id)
    _set_head(dst, session_id, step)
    if step != leaf:
        heads.moved.append((session_id, step))


def head_unreadable(dst: sqlite3.Connection, session_id: int, recovered: set[int], heads: Heads) -> None:
    """The session's row in the damaged file is unreadable: continue from its newest message
    written after the backup, if any came back, else from where the backup had it."""
    newest = _newest(dst, session_id, among=recovered)
    if newest is not None:
        _set_head(dst, session_id, newest)
    row = dst.execute("SELECT active_leaf_id FROM sessions WHERE id = ?", (session_id,)).fetchone()
    heads.unreadable.append((session_id, row[0] if row else None))


def _newest(dst: sqlite3.Connection, session_id: int, among: set[int] | None = None) -> int | None:
    ids = [row[0] for row in dst.execute("SELECT id FROM messages WHERE session_id = ?", (session_id,))]
    if among is not None:
        ids = [i for i in ids if i in among]
    return max(ids, default=None)


def _set_head(dst: sqlite3.Connection, session_id: int, message_id: int | None) -> None:
    dst.execute("UPDATE sessions SET active_leaf_id = ? WHERE id = ?", (message_id, session_id))


def describe(deletions: Deletions, heads: Heads, when: str, undone: Undone | None = None) -> list[str]:
    """Sentences for the recovery notice about deletions, undos and heads."""
    parts: list[str] = []
    if undone is not None and (undone.messages or undone.session_ids):
        parts.append(f"Deletions undone after the backup stay undone ({len(undone.session_ids)} session(s), "
                     f"{undone.messages} message(s) brought back from the damaged file).")
    if undone is not None and undone.lost:
        parts.append(f"{undone.lost} message(s) brought back by an undo after the backup could not be "
                     "recovered.")
    if undone is not None and undone.unknown:
        parts.append(f"Some deletions undone after {when} could not be read from the damaged file: "
                     "what you brought back since then may be missing.")
    if deletions.sessions or deletions.messages:
        parts.append(f"Deletions made after the backup were done again ({deletions.sessions} session(s), "
                     f"{deletions.messages} message(s)).")
    if deletions.unknown:
        parts.append(f"Some deletions made after {when} could not be read from the damaged file: "
                     "sessions or messages you deleted since then may be back.")
    if heads.moved:
        parts.append("The current message of " + _sessions(heads.moved) + " could not be recovered; "
                     "each now continues from the last message of its branch that could be.")
    if heads.unreadable:
        parts.append("The current message of " + _sessions(heads.unreadable) + " could not be read; "
                     "each now continues from its newest recovered message: check that it is the "
                     "branch you were on.")
    return parts


def _sessions(pairs: list[tuple[int, int | None]], shown: int = 5) -> str:
    """``session 3 (now at message 17), session 5 (now empty) and 2 more``."""
    words = [f"session {s} (now at message {m})" if m is not None else f"session {s} (now empty)"
             for s, m in pairs[:shown]]
    if len(pairs) > shown:
        words.append(f"{len(pairs) - shown} more")
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]
