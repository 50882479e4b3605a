"""CI form of the corruption trials: every kind of damage to every file llamachat keeps.

The full report (``python -m tests.trials.corruption``) runs the same trials; here each
outcome is asserted one by one, so a failure names the file, the kind of damage and
what went wrong: not detected, not reported, not deleted, not recomputed exactly, or
data lost from the database backup.
"""

from __future__ import annotations

import random

import pytest

from tests.trials import corrupt_checkpoints, corrupt_database, corrupt_settings
from tests.trials.corruption import run_corruption_trials, summary

ARCHS = ("llama", "gemma3", "lfm2", "mamba")


@pytest.fixture(scope="module")
def checkpoint_trials(tmp_path_factory):
    trials = {}
    rng = random.Random(3)
    for arch in ARCHS:
        trials[arch] = corrupt_checkpoints.CheckpointTrials(tmp_path_factory.mktemp(arch), arch, rng)
    yield trials
    for each in trials.values():
        each.close()


@pytest.mark.engine
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kind", corrupt_checkpoints.KINDS)
def test_damaged_checkpoint_is_refused_and_recomputed_exactly(checkpoint_trials, arch, kind):
    outcome = checkpoint_trials[arch].run(kind)
    assert outcome.detected, f"no report named the damaged file ({outcome})"
    assert "was corrupt (" in outcome.report and "deleted" in outcome.report
    assert outcome.deleted
    assert outcome.recomputed > 0
    assert outcome.exact, "the branch restored after the damage differs from a from-scratch run"
    assert outcome.rewritten, "the recomputed checkpoint is not the file it replaced"


@pytest.mark.parametrize("after_backup", [0, 12])
@pytest.mark.parametrize("kind", [k for k in corrupt_database.KINDS if k != "backup-damaged-too"])
def test_damaged_database_is_restored_from_its_backup(tmp_path, kind, after_backup):
    outcome = corrupt_database.run_database_trial(tmp_path, kind, after_backup, random.Random(7))
    assert outcome.detected and outcome.recovered, outcome
    assert "could not be used" in outcome.notice and "kept as" in outcome.notice
    assert outcome.kept_aside, "the damaged file was not kept byte for byte"
    assert outcome.lost_from_backup == 0
    assert outcome.salvaged + outcome.lost_after_backup == outcome.after_backup
    assert outcome.told_loss, f"lost {outcome.lost_after_backup} newer messages without saying so"


def test_damage_to_old_messages_loses_nothing_written_after_the_backup(tmp_path):
    outcome = corrupt_database.run_database_trial(tmp_path, "old-page-overwritten", 12, random.Random(7))
    assert outcome.ok and outcome.salvaged == 12, outcome
    assert "12 message(s) and 1 session(s) written after the backup were recovered" in outcome.notice


def test_database_and_backup_both_damaged_are_refused_and_untouched(tmp_path):
    outcome = corrupt_database.run_database_trial(tmp_path, "backup-damaged-too", 12, random.Random(7))
    assert outcome.detected and not outcome.recovered and outcome.kept_aside
    assert "cannot be used either" in outcome.notice


@pytest.mark.parametrize("kind", corrupt_settings.CONFIG_KINDS)
def test_damaged_config_falls_back_and_names_the_line(tmp_path, kind):
    outcome = corrupt_settings.run_config_trial(tmp_path, kind)
    assert outcome.ok, outcome


@pytest.mark.parametrize("kind", corrupt_settings.THEME_KINDS)
def test_damaged_theme_is_skipped_and_named(tmp_path, kind):
    outcome = corrupt_settings.run_theme_trial(tmp_path, kind)
    assert outcome.ok, outcome


@pytest.mark.engine
def test_report_counts_every_corruption(tmp_path):
    report = run_corruption_trials(tmp_path, seed=2, archs=("llama",), settings=False)
    made = report["corruptions_by_target"]
    assert made == {"checkpoint": len(corrupt_checkpoints.KINDS), "database": 2 * len(corrupt_database.KINDS)}
    assert report["detected"] == made
    assert report["failures"] == 0, summary(report)
    assert report["database_rows_lost_from_backup"] == 0
