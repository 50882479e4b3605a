"""Several processes on one database, and databases that are healthy but hard to reach.

Recovery replaces the database file, so it must never happen under another process that
has the file open (that process would go on writing into the file set aside, and lose
everything it showed as saved); a process whose file was replaced anyway must stop
writing. And only real damage may lead to recovery: a database locked by another
program, on read-only media or on a full disk is healthy, and is waited for, read, or
reported as such. Every other process here is real, driven through pipes
(``tests.store_child``); the full disk and read-only media are real file systems
(``tests.fs_support``).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sessions.store import (
    DatabaseBusy,
    DatabaseFull,
    DatabaseInUse,
    DatabaseReadOnly,
    SessionStore,
    StoreError,
    backup,
    opening,
)
from sessions.store.errors import DatabaseDamaged
from tests.store_child import REPO, StoreProcess

GARBAGE = b"this is not a database, it is a shopping list\n" * 200


def make(db: Path, texts=("one", "two", "three")) -> int:
    """A database with one session, and its backup (written by the second open)."""
    with SessionStore.open(db) as store:
        session = store.create_session(title="kept")
        parent = None
        for text in texts:
            parent = store.add_message(session.id, parent, "user", text).id
    SessionStore.open(db).close()
    assert backup.backup_path(db).is_file()
    return session.id


def texts(db: Path, session_id: int) -> list[str]:
    with SessionStore.open(db) as store:
        return [m.text for m in store.messages(session_id)]


def set_aside(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.corrupt-*"))


def cli(env_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, LLAMACHAT_DATA_DIR=str(env_dir))
    return subprocess.run([sys.executable, "-m", "sessions.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


# -- recovery and the processes that have the database open ------------------------------


def test_recovery_never_replaces_a_database_another_process_has_open(tmp_path, monkeypatch):
    monkeypatch.setattr(opening, "RECOVERY_WAIT", 0.2)
    db = tmp_path / "sessions.sqlite3"
    session_id = make(db)
    with StoreProcess(db) as app:
        assert app("open")["ok"]
        db.write_bytes(GARBAGE)  # damaged while the app has it open
        with pytest.raises(DatabaseInUse, match="another llamachat has it open") as refused:
            SessionStore.open(db)
        assert "it is not an SQLite database" in str(refused.value)
        assert db.read_bytes() == GARBAGE and set_aside(tmp_path) == []
        assert app("close")["ok"]
    with SessionStore.open(db) as store:  # alone now: restored from the backup
        assert "replaced by its backup" in store.recovery_notice
        assert [m.text for m in store.messages(session_id)] == ["one", "two", "three"]
    assert len(set_aside(tmp_path)) == 1


def test_the_command_line_says_another_llamachat_is_running(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    make(db)
    with StoreProcess(db) as app:
        assert app("open")["ok"]
        db.write_bytes(GARBAGE)
        done = cli(tmp_path, "sessions")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert "another llamachat has it open" in done.stderr and "Traceback" not in done.stderr
    assert db.read_bytes() == GARBAGE and set_aside(tmp_path) == []


def test_two_stores_in_one_process_are_two_holders(tmp_path, monkeypatch):
    monkeypatch.setattr(opening, "RECOVERY_WAIT", 0.05)
    db = tmp_path / "sessions.sqlite3"
    make(db)
    with SessionStore.open(db):
        db.write_bytes(GARBAGE)
        with pytest.raises(DatabaseInUse):
            SessionStore.open(db)
    assert db.read_bytes() == GARBAGE


def test_a_process_whose_database_was_replaced_stops_writing(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    session_id = make(db)
    with StoreProcess(db) as app:
        assert app("open")["ok"]
        assert app("add", session=session_id, role="user", text="before the swap")["ok"]
        # A program that takes no lock (an older llamachat, a restore by hand) puts the
        # backup in place while the app still has the old file open.
        backup.recover(db, DatabaseDamaged("damaged", "damaged"))
        late = app("add", session=session_id, role="user", text="after the swap")
        assert late == {"ok": False, "error": "DatabaseReplaced", "message": late["message"]}
        assert "was replaced or moved by another program" in late["message"]
        again = app("add", session=session_id, role="user", text="and later")
        assert again["error"] == "DatabaseReplaced"  # it stays stopped
    saved = texts(db, session_id)
    assert "before the swap" in saved  # carried over from the file set aside
    assert "after the swap" not in saved and "and later" not in saved


# -- a healthy database is never called damaged ------------------------------------------


def test_a_database_locked_by_another_program_is_busy_not_damaged(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    session_id = make(db)
    before = db.read_bytes()
    with StoreProcess(db) as tool:
        assert tool("hold", how="locking-mode")["ok"]  # no reader gets in
        with pytest.raises(DatabaseBusy, match="busy: another program holds the session database"):
            SessionStore.open(db, busy_timeout=0.3)
        assert tool("release")["ok"]
    assert set_aside(tmp_path) == [] and db.read_bytes() == before
    assert texts(db, session_id) == ["one", "two", "three"]


def test_a_long_write_elsewhere_neither_stops_opening_nor_reading(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    session_id = make(db)
    with StoreProcess(db) as importer:
        assert importer("hold", how="immediate")["ok"]  # a long import in another process
        with SessionStore.open(db, busy_timeout=0.3) as store:
            assert [m.text for m in store.messages(session_id)] == ["one", "two", "three"]
            with pytest.raises(DatabaseBusy, match="nothing was saved"):
                store.add_message(session_id, None, "user", "while it imports")
        assert importer("release")["ok"]
    assert set_aside(tmp_path) == []


def test_read_only_media_are_read_and_writes_refused_in_a_sentence(small_disk):
    db = small_disk.folder / "sessions.sqlite3"
    session_id = make(db)
    small_disk.make_read_only()
    with SessionStore.open(db) as store:
        assert store.read_only and store.recovery_notice is None
        assert [m.text for m in store.messages(session_id)] == ["one", "two", "three"]
        assert store.load_session_tree(session_id)[0].title == "kept"
        with pytest.raises(DatabaseReadOnly, match="is read-only .*can be read, but nothing new can be saved"):
            store.add_message(session_id, None, "user", "refused")
    listed = cli(small_disk.folder, "sessions")
    assert listed.returncode == 0 and "kept" in listed.stdout, listed.stderr
    renamed = cli(small_disk.folder, "rename", str(session_id), "new title")
    assert renamed.returncode == 1 and renamed.stderr.count("\n") == 1
    assert "read-only" in renamed.stderr and "Traceback" not in renamed.stderr
    assert set_aside(small_disk.folder) == []


def test_a_full_disk_is_said_and_never_repaired(small_disk):
    small_disk.need_mount()
    db = small_disk.folder / "sessions.sqlite3"
    session_id = make(db)
    with SessionStore.open(db) as store:
        filler = small_disk.fill()
        with pytest.raises(DatabaseFull, match="is full .*nothing was saved and nothing was lost"):
            store.add_message(session_id, None, "user", "a long reply " * 20000)
        filler.unlink()
    SessionStore.open(db).close()  # a clean close: no -wal or -shm left beside it
    filler = small_disk.fill()
    before = db.read_bytes()
    with pytest.raises(DatabaseFull, match="is full"):  # no room for its shared memory: not "damaged"
        SessionStore.open(db)
    assert set_aside(small_disk.folder) == [] and db.read_bytes() == before
    filler.unlink()
    with SessionStore.open(db) as store:
        assert store.recovery_notice is None
        assert [m.text for m in store.messages(session_id)] == ["one", "two", "three"]


@pytest.mark.parametrize(("message", "expected"), [
    ("database or disk is full", DatabaseFull),
    ("database is locked", DatabaseBusy),
])
def test_errors_while_opening_that_are_not_damage(tmp_path, monkeypatch, message, expected):
    db = tmp_path / "sessions.sqlite3"
    make(db)

    def fail(conn, target=None):
        raise sqlite3.OperationalError(message)

    monkeypatch.setattr(opening, "apply_migrations", fail)
    with pytest.raises(expected):
        SessionStore.open(db)
    assert set_aside(tmp_path) == []


def test_a_read_only_error_while_opening_opens_for_reading(tmp_path, monkeypatch):
    db = tmp_path / "sessions.sqlite3"
    session_id = make(db)

    def fail(conn, target=None):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(opening, "apply_migrations", fail)
    with SessionStore.open(db) as store:
        assert "readonly" in store.read_only
        assert len(store.messages(session_id)) == 3
        with pytest.raises(DatabaseReadOnly):
            store.rename_session(session_id, "no")


def test_only_damage_leads_to_recovery(tmp_path, monkeypatch):
    db = tmp_path / "sessions.sqlite3"
    make(db)
    calls = []

    def malformed(conn, target=None):
        calls.append(1)
        if len(calls) <= 2:  # the first open, and the check again under the exclusive lock
            raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(opening, "apply_migrations", malformed)
    with SessionStore.open(db) as store:
        assert "replaced by its backup" in store.recovery_notice
    assert len(set_aside(tmp_path)) == 1


def test_an_error_while_writing_names_its_cause(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    session_id = make(db)
    with SessionStore.open(db) as store:
        error = store._db.failure(sqlite3.OperationalError("database or disk is full"), saving=True)
        assert isinstance(error, DatabaseFull)
        assert isinstance(store._db.failure(sqlite3.OperationalError("database is locked"), saving=True),
                          DatabaseBusy)
        other = store._db.failure(sqlite3.OperationalError("no such table: x"), saving=True)
        assert type(other) is StoreError and "could not save the change" in str(other)
        assert store.messages(session_id)


def test_a_second_store_in_one_process_leaves_the_first_ones_locks(tmp_path):
    """SQLite's locks are the process's: reading the file's header from Python and closing
    it dropped them, and another process closing its connection then deleted the WAL of
    the store still open here; what that store wrote next was lost."""
    db = tmp_path / "sessions.sqlite3"
    session_id = make(db)
    with SessionStore.open(db) as first:
        first.add_message(session_id, None, "user", "in the WAL")
        SessionStore.open(db).close()  # a second store in this process (a test, a tool)
        with StoreProcess(db) as other:
            assert other("open")["ok"] and other("close")["ok"]  # it must not think it was the last
        assert db.with_name(db.name + "-wal").exists() and db.with_name(db.name + "-shm").exists()
        first.add_message(session_id, None, "user", "written after")
    assert {"in the WAL", "written after"} <= set(texts(db, session_id))
