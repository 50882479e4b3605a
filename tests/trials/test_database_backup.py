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
    later = time.time() + backup.BACKUP_EVERY_SECONDS + 60
    with pytest.MonkeyPatch.context() as clock:
        clock.setattr(time, "time", lambda: later)
        SessionStore.open(db).close()
    assert bak.stat().st_mtime_ns != stamp
    assert "after the backup" in texts_in_backup(db, session_id)


def texts_in_backup(db: Path, session_id: int) -> list[str]:
    with SessionStore.open(backup_path(db)) as copy:
        return [m.text for m in copy.messages(session_id)]


def test_a_backup_of_the_same_state_is_not_rewritten_however_old(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    make(db)
    SessionStore.open(db).close()
    stamp = backup_path(db).stat().st_mtime_ns
    later = time.time() + 10 * backup.BACKUP_EVERY_SECONDS
    with pytest.MonkeyPatch.context() as clock:
        clock.setattr(time, "time", lambda: later)
        SessionStore.open(db).close()
    assert backup_path(db).stat().st_mtime_ns == stamp


def test_a_backup_made_while_the_clock_said_2030_is_refreshed_once_the_clock_is_right(tmp_path):
    """The clock set back after the backup was made: its own stamp lies in the future,
    which no wait ends, so it is written again at the next open that has something new."""
    db = tmp_path / "sessions.sqlite3"
    session_id = make(db)
    in_2030 = 1_900_000_000.0
    with pytest.MonkeyPatch.context() as clock:
        clock.setattr(time, "time", lambda: in_2030)
        SessionStore.open(db).close()
    with SessionStore.open(db) as store:
        store.add_message(session_id, None, "user", "after the clock was corrected")
    SessionStore.open(db).close()
    assert "after the clock was corrected" in texts_in_backup(db, session_id)
    assert backup.backup_made(backup_path(db))[0] < in_2030


def test_the_backup_files_mtime_does_not_decide(tmp_path):
    """A backup whose file says 2030 (restored from an archive, touched by a sync tool)
    is still written again once the database has changed and its own stamp is old."""
    db = tmp_path / "sessions.sqlite3"
    session_id = make(db)
    SessionStore.open(db).close()
    bak = backup_path(db)
    os.utime(bak, (1_900_000_000, 1_900_000_000))
    with SessionStore.open(db) as store:
        store.add_message(session_id, None, "user", "written after the backup")
    later = time.time() + backup.BACKUP_EVERY_SECONDS + 60
    with pytest.MonkeyPatch.context() as clock:
        clock.setattr(time, "time", lambda: later)
        SessionStore.open(db).close()
    assert "written after the backup" in texts_in_backup(db, session_id)


def test_a_recovery_after_a_clock_correction_loses_no_later_session(tmp_path):
    """One session, a backup made while the clock said 2030; three sessions after the
    clock was corrected; then the database is garbage, so nothing can be salvaged from it:
    the backup holds all four, and the restored database has no backup table of its own."""
    import sqlite3

    db = tmp_path / "sessions.sqlite3"
    make(db)
    with pytest.MonkeyPatch.context() as clock:
        clock.setattr(time, "time", lambda: 1_900_000_000.0)
        SessionStore.open(db).close()
    with SessionStore.open(db) as store:
        for title in ("two", "three", "four"):
            session = store.create_session(title=title)
            store.add_message(session.id, None, "user", f"in {title}")
    SessionStore.open(db).close()
    db.write_bytes(b"garbage " * 1000)
    with SessionStore.open(db) as store:
        # The backup of 2030 is not the one taken (the notice names the date of the one
        # taken; a bare "2030" could be the time of day of today's, as in 20:30).
        assert store.recovery_notice is not None and "backup of 2030-" not in store.recovery_notice
        assert f"backup of {time.strftime('%Y-')}" in store.recovery_notice
        assert sorted(s.title for s in store.list_sessions()) == ["four", "kept", "three", "two"]
    conn = sqlite3.connect(db)
    try:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    assert backup.BACKUP_TABLE not in tables


def test_a_backup_that_does_not_say_when_it_was_made_is_written_again(tmp_path):
    import sqlite3

    db = tmp_path / "sessions.sqlite3"
    make(db)
    SessionStore.open(db).close()
    conn = sqlite3.connect(backup_path(db))
    conn.execute(f"DROP TABLE {backup.BACKUP_TABLE}")
    conn.commit()
    conn.close()
    SessionStore.open(db).close()
    assert backup.backup_made(backup_path(db)) is not None


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
