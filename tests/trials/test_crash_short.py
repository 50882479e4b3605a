"""CI form of the crash trials: one SIGKILL at each crash point.

``python -m tests.trials.crash`` runs 200 kills or more on demand; this short form
keeps CI under a minute while still striking each moment that matters (a prompt batch,
a reply token, a checkpoint before and after its rename, ``add_message`` before and
after its commit, a random delay, part-way through the printed reply) on the four
kinds of model memory, and running every check after each kill.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.trials.crash import MODELS, CrashTrials
from tests.trials.crash_checks import CheckpointScanner, DatabaseProblem, read_database, verify_file
from tests.trials.crash_plan import KILL_KINDS

KILLS = len(KILL_KINDS)  # each kind once; random kinds on top are the long form's


@pytest.mark.engine
def test_short_crash_trials(tmp_path):
    work = tmp_path / "crash"
    work.mkdir()
    report = CrashTrials(work, seed=11, base_env=dict(os.environ)).run(KILLS)
    assert report.failures == 0, report.summary()
    assert report.kills >= KILLS
    assert set(report.kills_by_point) == set(KILL_KINDS), report.summary()
    assert set(report.models) == set(MODELS)
    assert report.checks["greedy_replies_compared"] == report.trials
    assert report.checks["logits_compared"] == report.trials and report.logits_tokens_restored > 0
    assert report.checks["commit_counts"] >= 2
    assert report.checks["confirmed_messages_checked"] > 0
    assert report.checks["reply_texts_rederived"] > 0
    assert report.check_runs_restoring > 0, "no check reply restored anything: the comparison proves nothing"
    assert report.temp_files_cleaned == report.temp_files_left_by_kills


# The checks themselves must be able to fail: a bad file or a damaged database is caught.


def _one_checkpoint(folder: Path) -> Path:
    from sessions.checkpoints import CheckpointStore, Segment, StateCompat, prefix_hash

    segment = Segment(compat=StateCompat("trial-model", "trial-params"), prefix=prefix_hash([1, 2, 3]),
                      parent=None, start=0, end=3, state=bytes(range(256)) * 4, logits=None)
    with CheckpointStore(folder, ram_bytes=1 << 20, disk_bytes=1 << 30) as store:
        store.put(segment)
    (path,) = folder.glob("*/*.ckpt")
    return path


def test_scanner_reports_a_torn_file_and_a_flipped_payload(tmp_path):
    scanner = CheckpointScanner(tmp_path / "ck")
    path = _one_checkpoint(tmp_path / "ck")
    assert scanner.scan().bad == [] and verify_file(path) is None
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # header intact: only a full read sees it
    scan = scanner.scan()
    assert scan.bad == [f"{path.name}: checksum mismatch"]
    path.write_bytes(data[: len(data) // 2])
    scan = scanner.scan()
    assert len(scan.problems) == 1 and path.name in scan.problems[0] and not path.exists()


def test_database_check_refuses_a_database_that_needed_repair(tmp_path):
    from sessions.store import SessionStore

    db = tmp_path / "sessions.sqlite3"
    with SessionStore.open(db) as store:
        store.add_message(store.create_session().id, None, "user", "hello")
    assert len(read_database(db).messages) == 1  # this open also wrote the backup
    db.write_bytes(b"not a database\n" * 10)
    with pytest.raises(DatabaseProblem, match="opening needed a recovery"):
        read_database(db)  # recovered, but a kill must never need that
    db.write_bytes(b"not a database\n" * 10)
    db.with_name(db.name + ".bak").unlink()
    with pytest.raises(DatabaseProblem, match="does not open"):
        read_database(db)


@pytest.mark.engine
def test_reply_texts_catch_a_text_that_is_not_its_tokens(tmp_path):
    import sqlite3

    from sessions.store import SessionStore
    from sessions.synth import make_model
    from tests.real_controller import real_controller
    from tests.trials.crash_checks import ReplyTexts

    db = tmp_path / "sessions.sqlite3"
    model = make_model("llama", "tiny")
    with SessionStore.open(db) as store, real_controller(tmp_path, store, n_batch=16, max_tokens=6) as controller:
        controller.load_model(model)
        controller.new_session()
        controller.send("Hello")
        reply = controller.generate_reply()
    texts = ReplyTexts([model])
    try:
        assert texts.mismatches(db, [reply.id]) == (1, [])
        with sqlite3.connect(db) as conn:  # what a continue used to store: the character garbled
            conn.execute("UPDATE messages SET text = text || '\ufffd' WHERE id = ?", (reply.id,))
        conn.close()
        compared, problems = texts.mismatches(db, [reply.id])
        assert compared == 1 and len(problems) == 1 and f"message {reply.id}" in problems[0]
    finally:
        texts.close()
