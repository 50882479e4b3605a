"""Schema versions: old databases are upgraded in place; newer or broken files are refused."""

from __future__ import annotations

import sqlite3

import pytest

from sessions.store import SCHEMA_VERSION, SessionStore, StoreError, schema
from sessions.store.schema import MIGRATIONS, Migration, apply_migrations, current_version


def raw(path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None)


def build_version_1(path) -> dict[str, int]:
    """A database as the first release wrote it, with one short conversation in it."""
    conn = raw(path)
    assert apply_migrations(conn, target=1) == [MIGRATIONS[0].name]
    assert current_version(conn) == 1
    conn.execute(
        "INSERT INTO sessions(title, created_at, updated_at, model_path, sampling)"
        " VALUES ('Old chat', 100.0, 200.0, '/models/old.gguf', '{\"temperature\": 0.2}')"
    )
    session_id = conn.execute("SELECT max(id) FROM sessions").fetchone()[0]
    conn.execute(
        "INSERT INTO messages(session_id, parent_id, role, text, created_at)"
        " VALUES (?, NULL, 'user', 'remember the walrus', 150.0)", (session_id,)
    )
    first = conn.execute("SELECT max(id) FROM messages").fetchone()[0]
    conn.execute(
        "INSERT INTO messages(session_id, parent_id, role, text, created_at)"
        " VALUES (?, ?, 'assistant', 'goo goo g''joob', 160.0)", (session_id, first)
    )
    second = conn.execute("SELECT max(id) FROM messages").fetchone()[0]
    conn.execute(
        "INSERT INTO remembered_children(session_id, parent_key, child_id) VALUES (?, ?, ?)",
        (session_id, first, second),
    )
    conn.execute("UPDATE sessions SET active_leaf_id = ? WHERE id = ?", (second, session_id))
    conn.close()
    return {"session": session_id, "first": first, "second": second}


def test_there_are_several_migrations_in_order():
    assert len(MIGRATIONS) >= 2
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert len({m.name for m in MIGRATIONS}) == len(MIGRATIONS)


def test_version_1_database_is_upgraded_with_data_intact(tmp_path):
    path = tmp_path / "old.sqlite3"
    ids = build_version_1(path)
    with SessionStore.open(path) as store:
        session = store.get_session(ids["session"])
        assert (session.title, session.model_path, session.active_leaf_id) == (
            "Old chat", "/models/old.gguf", ids["second"])
        assert session.sampling.temperature == 0.2 and session.created_at == 100.0
        messages = store.messages(ids["session"])
        assert [(m.role, m.text, m.stats) for m in messages] == [
            ("user", "remember the walrus", None), ("assistant", "goo goo g'joob", None)]
        assert store.load_tree(ids["session"]).remembered() == {ids["first"]: ids["second"]}
        assert [h.message_id for h in store.search("walrus")] == [ids["first"]]  # indexed on upgrade
        added = store.add_message(ids["session"], ids["second"], "user", "more", tokens={"fp": [1]})
        assert store.get_tokens(added.id, "fp") == [1]
    conn = raw(path)
    assert current_version(conn) == SCHEMA_VERSION
    recorded = [row[0] for row in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]
    assert recorded == list(range(1, SCHEMA_VERSION + 1))
    conn.close()


def test_migrations_are_applied_once(tmp_path):
    conn = raw(tmp_path / "x.sqlite3")
    assert len(apply_migrations(conn)) == SCHEMA_VERSION
    assert apply_migrations(conn) == []
    conn.close()


def test_a_failing_migration_leaves_the_previous_version(tmp_path, monkeypatch):
    path = tmp_path / "x.sqlite3"
    SessionStore.open(path).close()

    def half_done(conn):
        conn.execute("CREATE TABLE half_made (x)")
        raise sqlite3.OperationalError("disk trouble")

    monkeypatch.setattr(schema, "MIGRATIONS", MIGRATIONS + (Migration(SCHEMA_VERSION + 1, "bad", half_done),))
    conn = raw(path)
    with pytest.raises(sqlite3.OperationalError):
        apply_migrations(conn, target=SCHEMA_VERSION + 1)
    assert current_version(conn) == SCHEMA_VERSION
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'half_made'").fetchone() is None
    conn.close()


def test_newer_schema_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "new.sqlite3"
    with SessionStore.open(path) as store:
        store.create_session(title="from the future")
    conn = raw(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="newer version of llamachat") as caught:
        SessionStore.open(path)
    assert f"schema {SCHEMA_VERSION + 5}" in str(caught.value)
    assert path.read_bytes() == before


def test_garbage_file_is_refused_and_untouched(tmp_path):
    path = tmp_path / "sessions.sqlite3"
    garbage = b"these are my notes, not a database\n" * 100
    path.write_bytes(garbage)
    stamp = path.stat().st_mtime_ns
    with pytest.raises(StoreError, match="not an SQLite database") as caught:
        SessionStore.open(path)
    assert "left untouched" in str(caught.value)
    assert path.read_bytes() == garbage and path.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "sessions.sqlite3", "sessions.sqlite3.lock", "sessions.sqlite3.lock-intent"]  # the locks stay


def test_damaged_database_is_refused(tmp_path):
    path = tmp_path / "sessions.sqlite3"
    with SessionStore.open(path) as store:
        session = store.create_session()
        for i in range(200):
            store.add_message(session.id, None, "user", f"message {i} " + "x" * 200)
    data = bytearray(path.read_bytes())
    page = 4096
    data[page:] = b"\xff" * (len(data) - page)  # keep a valid header, wreck every page after it
    path.write_bytes(bytes(data))
    for side in ("-wal", "-shm"):
        path.with_name(path.name + side).unlink(missing_ok=True)
    damaged = path.read_bytes()
    with pytest.raises(StoreError, match="damaged"):
        SessionStore.open(path)
    assert path.read_bytes() == damaged


def test_a_directory_in_the_way_is_refused(tmp_path):
    path = tmp_path / "sessions.sqlite3"
    path.mkdir()
    with pytest.raises(StoreError, match="not a regular file"):
        SessionStore.open(path)
