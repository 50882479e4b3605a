"""The session database damaged on disk: detected, recovered from its backup, nothing lost.

A database with three sessions is written, closed and reopened (the reopen writes the
backup), sometimes grown after that backup, then damaged: a page in the middle of the
file or the page of the oldest messages overwritten, bits flipped in the middle, the
file cut in half, emptied, or replaced by garbage. Opening it must name the problem in
plain words, keep the damaged file aside byte for byte, and give back every session,
message and token list the backup held; messages written after the backup are
recovered from the damaged file when it can still be read, and the notice must say how
many could not be. With the backup damaged as well, opening must refuse and touch
neither file.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from sessions.store import SessionStore, StoreError
from sessions.store.backup import backup_path

KINDS = ("page-overwritten", "old-page-overwritten", "bits-flipped", "truncated", "emptied", "garbage",
         "backup-damaged-too")
PAGE = 4096
Rows = dict[str, set[tuple]]


@dataclass(frozen=True)
class DatabaseOutcome:
    kind: str
    after_backup: int
    """Messages written after the last backup (only the damaged file had them)."""
    detected: bool
    notice: str | None
    recovered: bool
    """The database opened again with everything the backup held."""
    kept_aside: bool
    """The damaged bytes are still on disk (aside, or untouched when refused)."""
    lost_from_backup: int
    """Rows the backup held that are missing or changed afterwards (must be 0)."""
    salvaged: int
    """Messages newer than the backup that came back from the damaged file."""
    lost_after_backup: int
    told_loss: bool
    """The notice mentions what could not be recovered, when anything was not."""

    @property
    def ok(self) -> bool:
        honest = self.told_loss or self.lost_after_backup == 0
        if self.kind == "backup-damaged-too":  # nothing to recover from: refused, untouched
            return self.detected and not self.recovered and self.kept_aside
        return self.detected and self.recovered and self.kept_aside and self.lost_from_backup == 0 and honest


def fill(store: SessionStore, rng: random.Random, sessions: int, messages: int, label: str) -> None:
    with store.transaction():  # one commit: the trials test damage, not fsync speed
        _fill(store, rng, sessions, messages, label)


def _fill(store: SessionStore, rng: random.Random, sessions: int, messages: int, label: str) -> None:
    for s in range(sessions):
        session = store.create_session(title=f"{label} session {s}")
        parent = None
        for i in range(messages):
            role = "user" if i % 2 == 0 else "assistant"
            text = f"{label} {s}.{i} " + " ".join(rng.choice(("sea", "sky", "map", "lamp")) for _ in range(40))
            parent = store.add_message(session.id, parent, role, text,
                                       tokens={"fp": [rng.randrange(32000) for _ in range(30)]}).id
        store.set_active_leaf(session.id, parent)


def rows(path: Path) -> Rows:
    """Every session, message and token row, read straight from the file (no store)."""
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return {
            "sessions": set(conn.execute("SELECT id, title, active_leaf_id FROM sessions")),
            "messages": set(conn.execute("SELECT id, session_id, parent_id, role, text FROM messages")),
            "tokens": set(conn.execute("SELECT message_id, model_fingerprint, tokens FROM message_tokens")),
        }
    finally:
        conn.close()


def damage(kind: str, path: Path, rng: random.Random) -> None:
    data = bytearray(path.read_bytes())
    pages = len(data) // PAGE
    middle = rng.randrange(pages // 3, 2 * pages // 3) * PAGE
    if kind == "page-overwritten":
        data[middle:middle + PAGE] = rng.randbytes(PAGE)
    elif kind == "old-page-overwritten":  # the page holding the very first message
        first = data.find(b"before 0.0 ") // PAGE * PAGE
        data[first:first + PAGE] = rng.randbytes(PAGE)
    elif kind == "bits-flipped":  # the b-tree page header of a page in the middle
        for offset in rng.sample(range(middle, middle + 12), 6):
            data[offset] ^= 1 << rng.randrange(8)
    elif kind in ("truncated", "backup-damaged-too"):
        data = data[: len(data) // 2]
    elif kind == "emptied":
        data = bytearray()
    elif kind == "garbage":
        data = bytearray(b"this is not a database, it is a shopping list\n" * 200)
    path.write_bytes(bytes(data))
    if kind == "backup-damaged-too":
        bak = backup_path(path)
        bak.write_bytes(bak.read_bytes()[: 3 * PAGE])


def run_database_trial(workdir: Path, kind: str, after_backup: int, rng: random.Random) -> DatabaseOutcome:
    folder = workdir / f"db-{kind}-{after_backup}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    db = folder / "sessions.sqlite3"
    with SessionStore.open(db) as store:
        fill(store, rng, 3, 40, "before")
    with SessionStore.open(db) as store:  # an open of a good file writes the backup
        if after_backup:
            fill(store, rng, 1, after_backup, "after")
    in_backup, everything = rows(backup_path(db)), rows(db)
    newer = {m[0] for m in everything["messages"]} - {m[0] for m in in_backup["messages"]}
    damage(kind, db, rng)
    damaged = db.read_bytes()
    try:
        store = SessionStore.open(db)
    except StoreError as error:
        untouched = db.read_bytes() == damaged and backup_path(db).is_file()
        return DatabaseOutcome(kind, len(newer), "damaged" in str(error) or "not an SQLite" in str(error),
                               str(error), False, untouched, 0, 0, len(newer), False)
    notice = store.recovery_notice
    store.close()
    asides = sorted(folder.glob("sessions.sqlite3.corrupt-*[0-9]"))
    kept = len(asides) == 1 and asides[0].read_bytes() == damaged
    after = rows(db)
    lost = sum(len(in_backup[t] - after[t]) for t in in_backup)
    salvaged = len(newer & {m[0] for m in after["messages"]})
    lost_newer = len(newer) - salvaged
    told = lost_newer == 0 or notice is not None and (
        f"{lost_newer} message(s) written after the backup could not" in notice
        or "could not be read from the damaged file" in notice)
    return DatabaseOutcome(kind, len(newer), notice is not None, notice, notice is not None, kept,
                           lost, salvaged, lost_newer, told)
