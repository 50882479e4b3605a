"""CI form of the concurrency trial: several processes on one session, a recovery in the middle.

``python -m tests.trials.concurrency`` runs the full form (6 processes, 40 rounds each; then
4 ask slots of 10 runs and the app with 10 questions).
"""

from __future__ import annotations

import pytest

from tests.trials.concurrency import run_concurrency_trial
from tests.trials.concurrency_app import run_app_trial


def test_no_message_is_lost_or_misplaced_by_processes_writing_through_a_recovery(tmp_path):
    report = run_concurrency_trial(tmp_path, workers=3, rounds=6, seed=3)
    assert report.failures == [], report.failures
    assert report.sent == 3 * 6 * 2 and report.stored == report.sent
    assert report.lost == 0 and report.misplaced == 0, report.summary()
    assert report.recoveries == 1 and report.damaged_after >= 18, report.summary()
    assert report.events["recovered"] >= 1, report.summary()  # a writer was told


@pytest.mark.engine
def test_ask_processes_and_the_app_lose_and_misplace_nothing_through_a_recovery(tmp_path):
    report = run_app_trial(tmp_path, asks=2, rounds=2, app_rounds=2, seed=3)
    assert report.failures == [], report.failures
    assert report.sent == (2 * 2 + 2) * 2 and report.stored == report.sent, report.summary()
    assert report.lost == 0 and report.misplaced == 0, report.summary()
    assert report.recoveries == 1 and report.damaged_after > 0, report.summary()
