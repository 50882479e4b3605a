"""CI form of the concurrency trial: several processes on one session, a recovery in the middle.

``python -m tests.trials.concurrency`` runs the full form (6 processes, 40 rounds each).
"""

from __future__ import annotations

from tests.trials.concurrency import run_concurrency_trial


def test_no_message_is_lost_or_misplaced_by_processes_writing_through_a_recovery(tmp_path):
    report = run_concurrency_trial(tmp_path, workers=3, rounds=6, seed=3)
    assert report.failures == [], report.failures
    assert report.sent == 3 * 6 * 2 and report.stored == report.sent
    assert report.lost == 0 and report.misplaced == 0, report.summary()
    assert report.recoveries == 1 and report.damaged_after >= 18, report.summary()
    assert len(list(tmp_path.glob("sessions.sqlite3.corrupt-*"))) == 1
