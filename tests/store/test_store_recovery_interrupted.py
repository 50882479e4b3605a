"""A recovery killed half-way still ends with the user told, and nothing silently lost.

Recovery puts the backup in the database's place and copies in the newer rows of the
damaged file. A child process runs it and kills itself (SIGKILL: no ``finally`` runs) at a
chosen moment: in the middle of the salvage, between writing the notice and the swap,
and after the recovery but before the notice was ever shown. The next open must then say
what happened and hold the newer rows. Also here: salvage never raises on a damaged
value, and a full disk inside a nested transaction is reported as a full disk.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sessions.store import SessionStore
from sessions.store.backup import backup_path, notice_path, restored_path
from sessions.store.errors import DatabaseFull
from sessions.store.salvage import salvage_newer
from tests.store.test_store_recovery import build, overwrite_page_holding, rows

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import os, signal, sys
from pathlib import Path
from sessions.store import SessionStore, backup, salvage

where = sys.argv[2]
def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

if where == "salvage":  # killed after the first newer message went into the restored copy
    add = salvage._Copier._add_message
    def add_then_die(self, row):
        added = add(self, row)
        die()
        return added
    salvage._Copier._add_message = add_then_die
elif where == "swap":
    backup.finish_swap = die
store = SessionStore.open(Path(sys.argv[1]))
print(store.recovery_notice, flush=True)
die()  # "after": recovered, notice not yet shown, never closed
"""


def recover_and_die(db: Path, where: str) -> str:
    """Open ``db`` in a child that SIGKILLs itself at ``where``; returns what it printed."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", CHILD, str(db), where], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    return done.stdout


def damaged_with_newer_rows(db: Path) -> tuple[dict[str, int], tuple, list[int]]:
    """A database changed after its backup (a deletion, new turns), then damaged."""
    ids = build(db)
    with SessionStore.open(db) as store:
        store.delete_session(ids["beta"])
        head, added = ids["gamma5"], []
        for i in range(4):
            head = store.append_message(ids["gamma"], head, "user", f"newer {i}", expected_head=head).id
            added.append(head)
    before = rows(db)
    overwrite_page_holding(db, b"OLDEST alpha 0")
    return ids, before, added


@pytest.mark.parametrize("where", ["salvage", "swap", "after"])
def test_a_recovery_killed_at_any_point_is_told_at_the_next_open(tmp_path, where):
    db = tmp_path / "sessions.sqlite3"
    ids, before, added = damaged_with_newer_rows(db)
    printed = recover_and_die(db, where)
    assert ("replaced by its backup" in printed) == (where == "after")
    with SessionStore.open(db) as store:
        notice = store.recovery_notice
        assert notice is not None and "replaced by its backup" in notice
        assert "4 message(s) and 0 session(s) written after the backup were recovered" in notice
        assert [m.text for m in store.messages(ids["gamma"])][-4:] == [f"newer {i}" for i in range(4)]
    assert rows(db) == before  # the deletion stays done, every newer message and head is there
    assert not restored_path(db).exists() and not notice_path(db).exists()
    with SessionStore.open(db) as store:  # shown once the database was closed: said no more
        assert store.recovery_notice is None


def test_salvage_skips_and_counts_a_damaged_value_and_never_raises(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    ids = build(db)
    with SessionStore.open(db) as store:
        store.append_message(ids["gamma"], ids["gamma5"], "user", "newer", expected_head=ids["gamma5"])
    restored = tmp_path / "restored.sqlite3"
    shutil.copyfile(backup_path(db), restored)
    raw = sqlite3.connect(db)  # a damaged page can hold any value: text where a time belongs
    raw.execute("UPDATE sessions SET updated_at = 'garbage' WHERE id = ?", (ids["alpha"],))
    raw.commit()
    raw.close()
    salvage = salvage_newer(db, restored)
    assert salvage.skipped == 1 and salvage.messages_recovered == 1
    assert salvage.error is not None and "not supported between" in salvage.error
    unopenable = salvage_newer(db, tmp_path / "no such folder" / "restored.sqlite3")
    assert unopenable.messages_found is None and unopenable.error


def test_a_full_disk_inside_a_nested_transaction_is_said_as_a_full_disk(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    with SessionStore.open(db) as store:
        session_id = store.create_session(title="kept").id
        conn = store._db.conn
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 2}")  # SQLite answers SQLITE_FULL
        with pytest.raises(DatabaseFull, match="is full"), store.transaction():
            store.add_message(session_id, None, "user", "a long message " * 20000)
        assert not conn.in_transaction
        conn.execute("PRAGMA max_page_count = 1073741823")
        store.add_message(session_id, None, "user", "after")
        assert [m.text for m in store.messages(session_id)] == ["after"]
