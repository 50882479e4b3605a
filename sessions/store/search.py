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
    """Sessions where every word of ``query`` is in the title or some message (not
    necessarily the same one: "dogs cats" finds a chat that spoke of each in turn);
    None for an empty query."""
    words = query.split()
    if not words:
        return None
    if fts_query(query) is not None and has_full_text(conn):
        words = [word for word in words if fts_query(word) is not None]  # as one FTS query drops them
    found: set[int] | None = None
    for word in words:
        sessions = _sessions_with(conn, word)
        found = sessions if found is None else found & sessions
        if not found:
            break
    return found or set()


def _sessions_with(conn: sqlite3.Connection, word: str) -> set[int]:
    """Sessions whose title or any message holds ``word``."""
    match = fts_query(word)
    if match is not None and has_full_text(conn):
        rows = conn.execute(
            "SELECT m.session_id FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            " WHERE messages_fts MATCH ?"
            " UNION SELECT rowid FROM sessions_fts WHERE sessions_fts MATCH ?",
            (match, match),
        )
    else:
        patterns = _like_patterns(word)
        rows = conn.execute(
            f"SELECT session_id FROM messages WHERE {_like_clause('text', len(patterns))}"
            f" UNION SELECT id FROM sessions WHERE {_like_clause('title', len(patterns))}",
            patterns + patterns,
        )
    return {row[0] for row in rows}


def spread_hits(conn: sqlite3.Connection, query: str, hits: list[SearchHit], limit: int) -> list[SearchHit]:
    """``hits``, then the sessions that hold every word only across messages, as titles."""
    if len(query.split()) < 2 or len(hits) >= limit:
        return hits
    shown = {hit.session_id for hit in hits}
    more = sorted((matching_session_ids(conn, query) or set()) - shown, reverse=True)
    rows = [conn.execute("SELECT id, title FROM sessions WHERE id = ?", (session_id,)).fetchone()
            for session_id in more[: limit - len(hits)]]
    return hits + [SearchHit(row[0], None, row[1], row[1]) for row in rows if row is not None]


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
        return spread_hits(conn, query, hits[:limit], limit)
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
    return spread_hits(conn, query, hits[:limit], limit)
