"""The database schema as an ordered list of forward-only, named migrations.

A user's chats outlive any one version of llamachat, so the schema is never edited in
place: each change is a new migration appended to ``MIGRATIONS``, applied once, in order,
inside its own transaction, and recorded both in ``PRAGMA user_version`` (the source of
truth) and in the ``schema_migrations`` table (for people reading the file). Migrations
are lists of single statements rather than scripts because ``executescript`` would commit
halfway and break the all-or-nothing promise.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass

Steps = Callable[[sqlite3.Connection], None]


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    apply: Steps


def _run(*statements: str) -> Steps:
    def apply(conn: sqlite3.Connection) -> None:
        for statement in statements:
            conn.execute(statement)

    return apply


# Ids use AUTOINCREMENT so a deleted message's id is never handed out again: frozen
# tokens and state checkpoints are keyed by message id and must never match a stranger.
_CORE = _run(
    """CREATE TABLE schema_migrations (
        version INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        applied_at REAL NOT NULL
    )""",
    """CREATE TABLE sessions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        title TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        model_path TEXT,
        model_fingerprint TEXT,
        system_prompt TEXT,
        sampling TEXT NOT NULL DEFAULT '{}',
        active_leaf_id INTEGER REFERENCES messages(id) ON DELETE SET NULL
    )""",
    # The parent link is checked at commit time, so a whole subtree can go in one
    # statement without a cascade as deep as the conversation is long.
    """CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        parent_id INTEGER REFERENCES messages(id) DEFERRABLE INITIALLY DEFERRED,
        role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant')),
        text TEXT NOT NULL,
        created_at REAL NOT NULL
    )""",
    "CREATE INDEX messages_by_session ON messages(session_id, id)",
    "CREATE INDEX messages_by_parent ON messages(parent_id)",
    "CREATE INDEX sessions_by_update ON sessions(updated_at)",
    # parent_key is the parent's id, or 0 for the top level (ids start at 1).
    """CREATE TABLE remembered_children (
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        parent_key INTEGER NOT NULL,
        child_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        PRIMARY KEY (session_id, parent_key)
    )""",
    "CREATE INDEX remembered_by_child ON remembered_children(child_id)",
)

_STATS_AND_TOKENS = _run(
    "ALTER TABLE messages ADD COLUMN stats TEXT",
    """CREATE TABLE message_tokens (
        message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
        model_fingerprint TEXT NOT NULL,
        tokens BLOB NOT NULL,
        PRIMARY KEY (message_id, model_fingerprint)
    )""",
)


def fts5_available(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite build has FTS5 (almost all do; search falls back to LIKE)."""
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.fts5_probe USING fts5(x)")
        conn.execute("DROP TABLE temp.fts5_probe")
        return True
    except sqlite3.OperationalError:
        return False


def _external_fts(table: str, column: str) -> list[str]:
    """An FTS5 index over ``table.column`` kept in step by triggers."""
    index = f"{table}_fts"
    add = f"INSERT INTO {index}(rowid, {column}) VALUES (new.id, new.{column});"
    drop = f"INSERT INTO {index}({index}, rowid, {column}) VALUES ('delete', old.id, old.{column});"
    return [
        f"""CREATE VIRTUAL TABLE {index} USING fts5({column}, content='{table}',
            content_rowid='id', tokenize='unicode61 remove_diacritics 2')""",
        f"CREATE TRIGGER {index}_insert AFTER INSERT ON {table} BEGIN {add} END",
        f"CREATE TRIGGER {index}_delete AFTER DELETE ON {table} BEGIN {drop} END",
        f"CREATE TRIGGER {index}_update AFTER UPDATE OF {column} ON {table} BEGIN {drop} {add} END",
        f"INSERT INTO {index}({index}) VALUES ('rebuild')",
    ]


def _full_text_search(conn: sqlite3.Connection) -> None:
    if not fts5_available(conn):
        return
    for statement in _external_fts("messages", "text") + _external_fts("sessions", "title"):
        conn.execute(statement)


# What the user deleted, in the same transaction as the deletion. A backup is older than
# the damage it cures; replaying these rows from the damaged file keeps a recovery from
# bringing back sessions and branches the user deleted after the backup was taken.
_DELETIONS = _run(
    """CREATE TABLE deletions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        kind TEXT NOT NULL CHECK (kind IN ('session', 'subtree')),
        target INTEGER NOT NULL,
        deleted_at REAL NOT NULL
    )""",
)


# The chats ``llamachat serve`` keeps, one per conversation root: marked so that a request
# looks for its chat among them alone, and so that their own budget and age clean them.
_SERVED = _run(
    "ALTER TABLE sessions ADD COLUMN served INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX sessions_served ON sessions(served, updated_at)",
)


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "core tables: sessions, messages, remembered branches", _CORE),
    Migration(2, "generation stats and frozen tokens per model", _STATS_AND_TOKENS),
    Migration(3, "full-text search over messages and titles", _full_text_search),
    Migration(4, "deletions, so a recovery from the backup keeps them deleted", _DELETIONS),
    Migration(5, "served chats: the sessions llamachat serve keeps", _SERVED),
)
SCHEMA_VERSION = MIGRATIONS[-1].version


def current_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def apply_migrations(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> list[str]:
    """Bring the schema up to ``target``; returns the names of the migrations applied.

    Each migration runs in its own transaction together with the version bump, so a crash
    leaves the database at the previous version, never in between. The connection must
    be in autocommit mode (``isolation_level=None``). An up-to-date database takes no
    write lock at all: opening must not wait behind another process's long transaction.
    """
    applied: list[str] = []
    if current_version(conn) >= target:
        return applied
    for migration in MIGRATIONS:
        if migration.version > target:
            break
        conn.execute("BEGIN IMMEDIATE")
        try:
            if current_version(conn) >= migration.version:
                conn.execute("ROLLBACK")
                continue
            migration.apply(conn)
            conn.execute(
                "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
                (migration.version, migration.name, time.time()),
            )
            conn.execute(f"PRAGMA user_version = {migration.version:d}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        applied.append(migration.name)
    return applied
