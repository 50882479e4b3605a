"""The database backup: when it is written, what it looks like, how recovery uses it.

A backup that is written at the wrong moment (of a fresh empty file, over a good copy
every time the program starts) or that leaves litter is worse than none, and a
recovery the user never hears about is a silent data loss. These tests pin the policy
down; the corruption trials (``test_corruption``) exercise the damage itself.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sessions.store import SessionStore, StoreError, backup
from sessions.store.backup import backup_path, backup_problem
from sessions.store.schema import SCHEMA_VERSION

REPO = Path(__file__).resolve().parents[2]


def make(path: Path, messages: int = 5) -> int:
    with SessionStore.open(path) as store:
        session = store.create_session(title="kept")
        parent = None
        for i in range(messages):
            parent = store.add_message(session.id, parent, "user", f"message {i}").id
        return session.id


def test_no_backup_of_a_new_database_then_one_at_the_next_open(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    make(db)
    assert not backup_path(db).exists()
    SessionStore.open(db).close()
    bak = backup_path(db)
    assert bak.is_file() and backup_problem(bak) is None
    assert stat.S_IMODE(bak.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "sessions.sqlite3", "sessions.sqlite3.bak", "sessions.sqlite3.lock", "sessions.sqlite3.lock-intent"]


def test_backup_is_rewritten_only_when_old(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    session_id = make(db)
    SessionStore.open(db).close()
    bak = backup_path(db)
    stamp = bak.stat().st_mtime_ns
    with SessionStore.open(db) as store:
        store.add_message(session_id, None, "user", "after the backup")
    assert bak.stat().st_mtime_ns == stamp
    old = time.time() - backup.BACKUP_EVERY_SECONDS - 60
    os.utime(bak, (old, old))
    SessionStore.open(db).close()
    assert bak.stat().st_mtime > old + 60
    with SessionStore.open(bak) as copy:
        assert "after the backup" in [m.text for m in copy.messages(session_id)]


def test_temp_files_of_killed_backups_are_swept_and_live_ones_kept(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    make(db)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    leftover = tmp_path / f".sessions.sqlite3.bak.{dead}.0123abcd.tmp"
    in_flight = tmp_path / f".sessions.sqlite3.bak.{os.getppid()}.89abcdef.tmp"
    leftover.write_bytes(b"half a backup")
    in_flight.write_bytes(b"being written")
    SessionStore.open(db).close()
    assert not leftover.exists() and in_flight.exists()


def test_a_failed_backup_never_stops_the_open(tmp_path, monkeypatch, caplog):
    db = tmp_path / "sessions.sqlite3"
    make(db)

    def fail(conn, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(backup, "write_backup", fail)
    with SessionStore.open(db) as store:
        assert store.recovery_notice is None and store.list_sessions()
    assert "could not back up" in caplog.text


def test_an_emptied_file_is_damage_but_a_new_file_with_its_wal_is_not(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    make(db)
    SessionStore.open(db).close()
    db.write_bytes(b"")
    with SessionStore.open(db) as store:
        assert "it is empty" in store.recovery_notice
        assert [s.title for s in store.list_sessions()] == ["kept"]
    db.write_bytes(b"")
    db.with_name(db.name + "-wal").write_bytes(b"frames of a new database")
    with SessionStore.open(db) as store:  # its content may all be in the WAL: left to SQLite
        assert store.recovery_notice is None


def test_a_backup_from_a_newer_version_is_not_used(tmp_path):
    import sqlite3

    db = tmp_path / "sessions.sqlite3"
    make(db)
    SessionStore.open(db).close()
    conn = sqlite3.connect(backup_path(db))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    db.write_bytes(b"garbage " * 100)
    with pytest.raises(StoreError, match="cannot be used either: it was written by a newer llamachat"):
        SessionStore.open(db)
    assert db.read_bytes() == b"garbage " * 100


def test_the_command_line_prints_the_recovery_as_a_warning(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    db = data / "sessions.sqlite3"
    make(db)
    SessionStore.open(db).close()
    db.write_bytes(b"not a database any more\n" * 50)
    env = dict(os.environ, LLAMACHAT_DATA_DIR=str(data))
    done = subprocess.run([sys.executable, "-m", "sessions.cli", "sessions"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "llamachat: warning: the session database could not be used (it is not an SQLite database)" in done.stderr
    assert "kept" in done.stdout
    assert len(list(data.glob("sessions.sqlite3.corrupt-*"))) == 1
