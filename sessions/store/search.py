"""Finding text across every session.

User queries are free text, never FTS5 syntax: each word becomes a quoted prefix term, so
a query full of punctuation (``"C++ (draft)?"``) cannot raise a syntax error. When the
SQLite build lacks FTS5, or a query has no word characters at all, a plain LIKE scan
answers instead; it is slower but gives the same kind of result.
"""

from __future__ import annotations

import sqlite3

from sessions.store.records import SearchHit

SNIPPET_WORDS = 12
SNIPPET_CHARS = 80


def has_full_text(conn: sqlite3.Connection) -> bool:
    row = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'messages_fts'"
    ).fetchone()
    return row is not None


def fts_query(text: str) -> str | None:
    """Every word quoted and made a prefix; None when no word has a letter or digit."""
    terms = [word for word in text.split() if any(ch.isalnum() for ch in word)]
    if not terms:
        return None
    return " ".join('"' + word.replace('"', '""') + '"*' for word in terms)


def _like_patterns(text: str) -> list[str]:
    escaped = [w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") for w in text.split()]
    return [f"%{word}%" for word in escaped]


def _like_clause(column: str, count: int) -> str:
    return " AND ".join([f"{column} LIKE ? ESCAPE '\\'"] * count)


def _window(text: str, query: str) -> str:
    """A short piece of ``text`` around the first query word, for the LIKE path."""
    words = query.split()
    at = text.lower().find(words[0].lower()) if words else -1
    start = max(0, at - SNIPPET_CHARS // 3)
    piece = " ".join(text[start : start + SNIPPET_CHARS].split())
    return ("…" if start else "") + piece + ("…" if start + SNIPPET_CHARS < len(text) else "")


def matching_session_ids(conn: sqlite3.Connection, query: str) -> set[int] | None:
    """Sessions whose title or any message matches; None for an empty query."""
    if not query.split():
        return None
    match = fts_query(query)
    if match is not None and has_full_text(conn):
        rows = conn.execute(
            "SELECT m.session_id FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            " WHERE messages_fts MATCH ?"
            " UNION SELECT rowid FROM sessions_fts WHERE sessions_fts MATCH ?",
            (match, match),
        )
    else:
        patterns = _like_patterns(query)
        rows = conn.execute(
            f"SELECT session_id FROM messages WHERE {_like_clause('text', len(patterns))}"
            f" UNION SELECT id FROM sessions WHERE {_like_clause('title', len(patterns))}",
            patterns + patterns,
        )
    return {row[0] for row in rows}


def search(conn: sqlite3.Connection, query: str, limit: int) -> list[SearchHit]:
    """Title hits first, then message hits, best first, at most ``limit`` in all."""
    if not query.split() or limit <= 0:
        return []
    match = fts_query(query)
    if match is not None and has_full_text(conn):
        titles = conn.execute(
            "SELECT s.id, s.title FROM sessions_fts JOIN sessions s ON s.id = sessions_fts.rowid"
            " WHERE sessions_fts MATCH ? ORDER BY rank LIMIT ?",
            (match, limit),
        ).fetchall()
        messages = conn.execute(
            "SELECT m.session_id, m.id, s.title,"
            f" snippet(messages_fts, 0, '', '', '…', {SNIPPET_WORDS}) AS piece"
            " FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            " JOIN sessions s ON s.id = m.session_id"
            " WHERE messages_fts MATCH ? ORDER BY rank LIMIT ?",
            (match, limit),
        ).fetchall()
        hits = [SearchHit(row[0], None, row[1], row[1]) for row in titles]
        hits += [SearchHit(row[0], row[1], row[2], row[3]) for row in messages]
        return hits[:limit]
    patterns = _like_patterns(query)
    titles = conn.execute(
        f"SELECT id, title FROM sessions WHERE {_like_clause('title', len(patterns))}"
        " ORDER BY updated_at DESC LIMIT ?",
        (*patterns, limit),
    ).fetchall()
    messages = conn.execute(
        "SELECT m.session_id, m.id, s.title, m.text FROM messages m"
        " JOIN sessions s ON s.id = m.session_id"
        f" WHERE {_like_clause('m.text', len(patterns))} ORDER BY m.id DESC LIMIT ?",
        (*patterns, limit),
    ).fetchall()
    hits = [SearchHit(row[0], None, row[1], row[1]) for row in titles]
    hits += [SearchHit(row[0], row[1], row[2], _window(row[3], query)) for row in messages]
    return hits[:limit]
