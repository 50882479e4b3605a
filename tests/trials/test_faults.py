"""CI form of the fault trials: every fault class once, then the checks proved to bite.

``python -m tests.trials.faults`` runs 200 rounds or more on demand; this short form
runs each class once (the terminal closed under stdout or under both outputs, EIO, a full disk, stdout closed, a reader
gone, three signals, two clock jumps, three FIFOs, an undo then a recovery, a nearly full data disk, a FIFO in one of
llamachat's own files) with every check after each.
"""

from __future__ import annotations

import os
import time

import pytest

from sessions.crashpoints import ENV_VAR
from sessions.store import backup
from tests.trials.fault_inject import ASK_FAULTS
from tests.trials.faults import CLASSES, FaultTrials

pytestmark = pytest.mark.engine


def test_every_fault_class_loses_and_misplaces_nothing(tmp_path):
    report = FaultTrials(tmp_path, seed=7, base_env=dict(os.environ)).run(len(CLASSES))
    assert report.failures == [], report.summary()
    assert report.lost == 0 and report.misplaced == 0, report.summary()
    assert set(report.rounds) == set(CLASSES) and sum(report.rounds.values()) == len(CLASSES), report.summary()
    assert report.recoveries == 3, report.summary()  # one per clock round, one after the undo
    assert not report.skipped or os.geteuid() != 0, report.summary()
    assert sum(report.cut[name] for name in ASK_FAULTS) >= 1, report.summary()  # a fault struck mid-reply


def test_a_reply_killed_before_it_was_kept_is_counted_lost(tmp_path):
    """The checks themselves: an ask killed at its first token (SIGKILL, before any fault:
    nothing can keep the reply) leaves a question without a reply and a status no fault
    explains."""
    trial = FaultTrials(tmp_path, seed=7, base_env=dict(os.environ))
    trial.set_up()
    try:
        trial.env[ENV_VAR] = "generate.token:1"
        trial.play(["sigint"])
    finally:
        trial.close()
    assert trial.report.lost == 1, trial.report.summary()
    assert any("0 replies stored (status 137" in failure for failure in trial.report.failures), trial.report.summary()


def test_a_backup_judged_by_its_age_alone_is_caught_by_the_clock_round(tmp_path, monkeypatch):
    """The clock round's check bites: with the rule a clock can freeze (a backup is due
    only once its stamp is old), a backup stamped in the future is not written again at
    the next open, and the round says the backup lacks the newest session."""
    def by_age_alone(made: tuple[float, str], state: str, every: float) -> bool:
        return state != made[1] and time.time() - made[0] >= every  # a stamp ahead is never old

    monkeypatch.setattr(backup, "_stale", by_age_alone)
    trial = FaultTrials(tmp_path, seed=7, base_env=dict(os.environ))
    trial.set_up()
    try:
        trial.play(["clock-future-stamp"])
    finally:
        trial.close()
    assert any("the backup does not hold the newest session" in failure for failure in trial.report.failures), \
        trial.report.summary()
