"""Frozen tokens filed under a model's identity, and moving them when the identity changes.

Every message keeps the exact token ids a model saw, under that model's fingerprint.
Earlier versions fingerprinted a model by hashing the whole file; the fingerprint is now
a sample of it (``sessions.llama.fingerprint``). Sessions made before carry their tokens
under the old identity; refiling them under the new one keeps the tokens the model
really saw (a reply re-tokenized from its text may differ from what was sampled).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable


def fingerprints_of_sessions(conn: sqlite3.Connection, model_paths: Iterable[str]) -> set[str]:
    """Fingerprints recorded by the sessions that used any of ``model_paths``."""
    paths = list(dict.fromkeys(model_paths))
    if not paths:
        return set()
    marks = ",".join("?" * len(paths))
    rows = conn.execute(
        f"SELECT DISTINCT model_fingerprint FROM sessions WHERE model_path IN ({marks})"
        " AND model_fingerprint IS NOT NULL", paths,
    )
    return {row[0] for row in rows}


def refile_tokens(conn: sqlite3.Connection, old: str, new: str) -> int:
    """File every token list of ``old`` under ``new`` too (where none is yet); sessions follow."""
    cursor = conn.execute(
        "INSERT OR IGNORE INTO message_tokens(message_id, model_fingerprint, tokens)"
        " SELECT message_id, ?, tokens FROM message_tokens WHERE model_fingerprint = ?", (new, old),
    )
    conn.execute("UPDATE sessions SET model_fingerprint = ? WHERE model_fingerprint = ?", (new, old))
    return cursor.rowcount
