"""The benchmarks run end to end on tiny models, and their figures hold together.

The benchmark is run by hand (its bench-size models take minutes); this keeps it from
rotting in between, and checks what holds on any machine: W1 evaluates only its new
tokens, a reopen restores without evaluating, its logits equal a fresh recompute.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.engine
def test_the_benchmark_runs_on_tiny_models():
    run = subprocess.run(
        [sys.executable, "-m", "tests.bench.branching", "--size", "tiny", "--arch", "gemma3", "--threads", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    events = {record["event"]: record for record in map(json.loads, run.stdout.splitlines())}
    for name in ("identity", "load", "build: one prefill of the 12-turn chat", "W1 summary", "disk",
                 "reopen: restore the last branch from disk", "reopen: regenerate last reply",
                 "reopen: exactness", "reopen: continue with a new message", "turn overhead"):
        assert name in events, f"no {name!r} event"
    summary = events["W1 summary"]
    assert summary["tokens_evaluated"] == summary["new_tokens"] > 0
    restore = events["reopen: restore the last branch from disk"]
    assert restore["tokens_restored"] > 0 and restore["tokens_evaluated"] == 0
    low, high = restore["restore_seconds_range"]
    assert restore["reopens"] == 5 and low <= restore["restore_seconds"] <= high
    low, high = restore["new_process_restore_seconds_range"]
    assert 0 < low <= restore["new_process_restore_seconds"] <= high
    assert restore["bytes_read_vs_whole_state"] <= restore["budget_bytes_read_vs_whole_state"]
    assert restore["read_plus_memcpy_seconds"] > 0 and restore["read_plus_memcpy_cold_seconds"] > 0
    assert events["reopen: exactness"]["bit_identical_logits"] is True
    assert events["reopen: regenerate last reply"]["tokens_evaluated"] == 0
    budgets = [value for record in events.values() for key, value in record.items() if key.startswith("budget_")]
    assert budgets and all(isinstance(value, int | float) for value in budgets)


@pytest.mark.engine
def test_the_reopen_comparison_runs_on_a_tiny_model(tmp_path):
    """Two trees (here the same one twice), one restore each in a new process."""
    run = subprocess.run(
        [sys.executable, "-m", "tests.bench.reopen_ab", "--size", "tiny", "--arch", "lfm2", "--threads", "1",
         "--data", str(tmp_path / "w1"), "--repeat", "1", "--tree", str(REPO)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    records = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r["tree"] for r in records] == [str(REPO), str(REPO)]
    assert all(len(r["runs_ms"]) == 1 and r["median_ms"] == r["runs_ms"][0] > 0 for r in records)
    assert (tmp_path / "w1" / "w1.json").exists()  # kept: a second comparison skips the build
