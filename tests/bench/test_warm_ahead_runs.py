"""The warm-ahead benchmark runs end to end on tiny models, and says what holds on any
machine: the cold switch restores from disk, the warm one from RAM, both the same bytes
and no token evaluated."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.engine
def test_the_warm_ahead_benchmark_runs_on_tiny_models():
    run = subprocess.run(
        [sys.executable, "-m", "tests.bench.warm_ahead", "--size", "tiny", "--arch", "gemma3", "lfm2",
         "--turns", "2", "--repeat", "1", "--threads", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    records = [json.loads(line) for line in run.stdout.splitlines()]
    for arch in ("gemma3", "lfm2"):
        events = {r["event"]: r for r in records if r["arch"] == arch}
        cold, warm = events["cold"], events["warm"]
        assert cold["planned_tiers"] == ["disk"] and warm["planned_tiers"] == ["ram"]
        assert cold["bytes_restored"] == warm["bytes_restored"] > 0
        assert cold["tokens_evaluated"] == warm["tokens_evaluated"] == 0
        assert warm["warm_bytes"] >= warm["bytes_restored"] and warm["warm_left"] == 0
        assert events["summary"]["cold_median_ms"] > 0 and events["summary"]["warm_median_ms"] > 0
