"""The streaming benchmark runs end to end on a short reply, in a real pseudo-terminal, and
says what holds on any machine: every numbered chunk reaches the terminal, after it was
handed over, and the app's CPU time is counted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_streaming_benchmark_runs_on_a_short_reply():
    run = subprocess.run([sys.executable, "-m", "tests.bench.streaming_view", "--tokens", "120", "--rate", "200",
                          "--messages", "6"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    (record,) = [json.loads(line) for line in run.stdout.splitlines()]
    assert record["tokens"] == 120 and record["seen"] > 100  # a chunk replaced within a frame is not written
    lag = record["lag_ms"]
    assert 0 < lag["p50"] <= lag["p90"] <= lag["p99"] <= lag["max"]
    assert record["cpu_ms_per_token"] > 0 and record["stream_s"] > 0
