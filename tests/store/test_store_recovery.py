"""Recovery from the backup respects what the user did after the backup was taken.

The backup is older than the damage. Restored on its own it would bring back sessions
and branches deleted since, and leave each session's current message where it was when
the backup was taken (the next message would then branch silently from an old turn).
These tests damage real files after real changes and check that deletions stay done,
heads come back (or the notice says which could not), and the notice says what the
restored database holds.
"""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path

from sessions.store import SessionStore, backup
from sessions.store.backup import backup_path

PAGE = 4096


def overwrite_page_holding(db: Path, marker: bytes, seed: int = 5) -> None:
    """Replace the page of ``db`` that holds ``marker`` with random bytes."""
    data = bytearray(db.read_bytes())
    at = data.find(marker)
    assert at > 0, f"{marker!r} is not in the file"
    start = at // PAGE * PAGE
    data[start:start + PAGE] = random.Random(seed).randbytes(PAGE)
    db.write_bytes(bytes(data))


def build(db: Path) -> dict[str, int]:
    """Three sessions written before the backup; the backup is taken by the second open."""
    ids: dict[str, int] = {}
    with SessionStore.open(db) as store:
        for name in ("alpha", "beta", "gamma"):
            session = store.create_session(title=name)
            ids[name] = session.id
            head = None
            for i in range(6):
                role = "user" if i % 2 == 0 else "assistant"
                text = f"OLDEST {name} {i} " if i == 0 else f"{name} turn {i} " + "words " * 150
                head = store.append_message(session.id, head, role, text, expected_head=head).id
                ids[f"{name}{i}"] = head
    SessionStore.open(db).close()
    assert backup_path(db).is_file()
    return ids


def rows(db: Path) -> tuple[set[int], set[int], dict[int, int | None]]:
    with SessionStore.open(db) as store:
        sessions = {s.id for s in store.list_sessions()}
        messages = {m.id for s in sessions for m in store.messages(s)}
        heads = {s: store.get_session(s).active_leaf_id for s in sessions}
    return sessions, messages, heads


def test_deletions_after_the_backup_stay_deleted(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    ids = build(db)
    with SessionStore.open(db) as store:
        store.delete_session(ids["beta"])
        store.delete_subtree(ids["alpha3"], expected_ids={ids[f"alpha{i}"] for i in range(3, 6)})
        added = store.append_message(ids["gamma"], ids["gamma5"], "user", "written after the backup",
                                     expected_head=ids["gamma5"]).id
    sessions_before, messages_before, heads_before = rows(db)
    overwrite_page_holding(db, b"OLDEST alpha 0")  # damage to data the backup holds
    with SessionStore.open(db) as store:
        notice = store.recovery_notice
    assert "replaced by its backup" in notice
    sessions, messages, heads = rows(db)
    assert ids["beta"] not in sessions and ids["alpha3"] not in messages
    assert (sessions, messages, heads) == (sessions_before, messages_before, heads_before)
    assert added in messages
    assert "Deletions made after the backup were done again (1 session(s), 9 message(s))" in notice
    assert "It now holds 2 session(s) and 10 message(s)" in notice


def test_each_head_comes_back_from_the_damaged_file(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    ids = build(db)
    with SessionStore.open(db) as store:  # after the backup: a rewind, an edit, a new turn
        store.set_active_leaf(ids["alpha"], ids["alpha1"])
        edit = store.append_message(ids["beta"], ids["beta2"], "user", "edited question",
                                    expected_head=ids["beta5"]).id
        turn = store.append_message(ids["gamma"], ids["gamma5"], "user", "one more",
                                    expected_head=ids["gamma5"]).id
    overwrite_page_holding(db, b"OLDEST beta 0")
    with SessionStore.open(db) as store:
        assert "current message" not in store.recovery_notice  # every head came back exactly
    _, _, heads = rows(db)
    assert heads == {ids["alpha"]: ids["alpha1"], ids["beta"]: edit, ids["gamma"]: turn}


def test_a_head_whose_message_is_lost_is_named_in_the_notice(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    ids = build(db)
    with SessionStore.open(db) as store:
        keep = store.append_message(ids["gamma"], ids["gamma5"], "user", "kept " + "x" * 3000,
                                    expected_head=ids["gamma5"]).id
        lost = store.append_message(ids["gamma"], keep, "assistant", "LOST REPLY " + "y" * 3000,
                                    expected_head=keep).id
    overwrite_page_holding(db, b"LOST REPLY")
    with SessionStore.open(db) as store:
        notice = store.recovery_notice
        head = store.get_session(ids["gamma"]).active_leaf_id
        messages = {m.id for m in store.messages(ids["gamma"])}
    assert lost not in messages and head in messages and head != ids["gamma5"]
    assert f"The current message of session {ids['gamma']} (now at message {head}) could not be" in notice
    assert "message(s) written after the backup could not be recovered" in notice


def test_a_damaged_file_that_cannot_be_read_at_all_says_deletions_may_be_back(tmp_path):
    db = tmp_path / "sessions.sqlite3"
    ids = build(db)
    with SessionStore.open(db) as store:
        store.delete_session(ids["beta"])
    db.write_bytes(b"garbage " * 4000)
    with SessionStore.open(db) as store:
        notice = store.recovery_notice
        assert ids["beta"] in {s.id for s in store.list_sessions()}  # nothing could tell otherwise
    assert "what you deleted since may be back" in notice
    assert "It now holds 3 session(s) and 18 message(s)" in notice


def test_heads_and_titles_come_back_after_the_clock_was_set_back(tmp_path, monkeypatch):
    """The chats and their backup were written while the clock said 2030; after the clock
    was corrected, a rewind, a new turn and a rename carry earlier times than the backup's
    rows. The damaged file descends from the backup, so what it still says wins whatever
    the times say."""
    import time

    db = tmp_path / "sessions.sqlite3"
    with monkeypatch.context() as clock:
        clock.setattr(time, "time", lambda: 1_900_000_000.0)
        ids = build(db)
    with SessionStore.open(db) as store:
        store.set_active_leaf(ids["alpha"], ids["alpha1"])
        turn = store.append_message(ids["gamma"], ids["gamma5"], "user", "one more",
                                    expected_head=ids["gamma5"]).id
        store.rename_session(ids["beta"], "renamed")
    overwrite_page_holding(db, b"OLDEST beta 0")
    with SessionStore.open(db) as store:
        assert "current message" not in store.recovery_notice
        assert store.get_session(ids["beta"]).title == "renamed"
    _, _, heads = rows(db)
    assert heads[ids["alpha"]] == ids["alpha1"] and heads[ids["gamma"]] == turn


def backed_up_now(db: Path) -> None:
    """Another process opens the database while the backup is due (the backup says it was
    made a backup period ago): the backup is rewritten."""
    with sqlite3.connect(backup_path(db)) as copy:
        copy.execute(f"UPDATE {backup.BACKUP_TABLE} SET made_at = ?", (time.time() - backup.BACKUP_EVERY_SECONDS - 60,))
    copy.close()
    stamp = backup_path(db).stat().st_mtime_ns
    SessionStore.open(db).close()
    assert backup_path(db).stat().st_mtime_ns != stamp


def test_a_deletion_undone_after_the_backup_stays_undone_through_a_recovery(tmp_path):
    """Recovery used to restore the backup (which recorded the deletion) plus newer rows
    only, so the branch brought back was lost again, and the notice said nothing was found."""
    db = tmp_path / "sessions.sqlite3"
    ids = build(db)
    branch = {ids[f"alpha{i}"] for i in range(3, 6)}
    with SessionStore.open(db) as app:
        deleted = app.delete_subtree_kept(ids["alpha3"], expected_ids=branch)
        backed_up_now(db)
        gone_chat = app.delete_session_kept(ids["beta"])
        backed_up_now(db)
        app.put_back(deleted)
        app.put_back(gone_chat)
        added = app.append_message(ids["alpha"], ids["alpha5"], "user", "after the undo " + "more " * 600,
                                   expected_head=ids["alpha5"]).id
    before = rows(db)
    overwrite_page_holding(db, page_apart(db, b"gamma turn ", [b"alpha turn ", b"beta turn ", b"OLDEST beta",
                                                               b"after the undo"]))
    with SessionStore.open(db) as store:
        notice = store.recovery_notice
    assert "replaced by its backup" in notice
    assert rows(db) == before and branch | {added, ids["beta5"]} <= before[1]
    assert "Deletions undone after the backup stay undone (1 session(s), 9 message(s) brought back" in notice
    assert "Nothing newer than the backup" not in notice
    assert deletion_records(db) == []  # a later recovery will not delete them again either


def page_apart(db: Path, wanted: bytes, others: list[bytes]) -> bytes:
    """The text of a message starting with ``wanted`` that shares no page with any message
    starting with one of ``others``: damage there loses nothing that came back."""
    data = db.read_bytes()

    def pages(prefix: bytes) -> dict[int, bytes]:
        found, at = {}, data.find(prefix)
        while at >= 0:
            found[at // PAGE] = data[at:at + len(prefix) + 2]
            at = data.find(prefix, at + 1)
        return found

    taken = {page for prefix in others for page in pages(prefix)}
    free = [text for page, text in pages(wanted).items() if page not in taken]
    assert free, "every page of those messages holds one of the others too"
    return free[0]


def deletion_records(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT kind, target FROM deletions").fetchall()
