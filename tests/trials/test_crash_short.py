"""CI form of the crash trials: a dozen SIGKILLs, every crash point hit at least once.

``python -m tests.trials.crash`` runs 200 kills or more on demand; this short form
keeps CI under a minute while still striking each moment that matters (a prompt batch,
a reply token, a checkpoint before and after its rename, ``add_message`` before and
after its commit, a random delay, part-way through the printed reply) on the four
kinds of model memory, and running every check after each kill.
"""

from __future__ import annotations

import os

import pytest

from tests.trials.crash import MODELS, CrashTrials
from tests.trials.crash_plan import KILL_KINDS

pytestmark = pytest.mark.engine

KILLS = 12


def test_short_crash_trials(tmp_path):
    work = tmp_path / "crash"
    work.mkdir()
    report = CrashTrials(work, seed=11, base_env=dict(os.environ)).run(KILLS)
    assert report.failures == 0, report.summary()
    assert report.kills >= KILLS
    assert set(report.kills_by_point) == set(KILL_KINDS), report.summary()
    assert set(report.models) == set(MODELS)
    assert report.checks["greedy_replies_compared"] == report.trials
    assert report.checks["commit_counts"] >= 2
    assert report.checks["confirmed_messages_checked"] > 0
    assert report.check_runs_restoring > 0, "no check reply restored anything: the comparison proves nothing"
    assert report.temp_files_cleaned == report.temp_files_left_by_kills
