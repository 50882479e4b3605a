"""The budget trial's short form: four ``ask`` processes at once stay within the folder's budget."""

from __future__ import annotations

import pytest

from .budget_trial import run_budget_trial

pytestmark = pytest.mark.engine


def test_four_asks_at_once_end_within_the_checkpoint_budget(tmp_path):
    report = run_budget_trial(tmp_path, asks=4, rounds=2)
    assert report.ok, report.summary()
    assert report.replies == 8 and report.on_disk > 0
