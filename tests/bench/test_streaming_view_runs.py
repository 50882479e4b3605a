"""The streaming benchmark runs end to end on a short reply, in a real pseudo-terminal, and
says what holds on any machine: every numbered chunk reaches the terminal, after it was
handed over, and the app's CPU time is counted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.bench.streaming_view import numbered_chunks, reply_text
from tests.tui.fake_engine import chunks

REPO = Path(__file__).resolve().parents[2]


def test_each_number_is_timed_from_the_chunk_that_holds_it():
    """The words between the numbered ones are chunks too: a number's lag counts from when
    its own chunk was handed over, not from the chunk at its number's place."""
    parts = chunks(reply_text(400))
    found = numbered_chunks(400)
    assert sorted(found) == list(range(400))
    assert all(f"{number:04d}" in parts[index] for number, index in found.items())
    assert len(parts) > 400 and max(found.values()) == len(parts) - 1


def test_the_streaming_benchmark_runs_on_a_short_reply():
    run = subprocess.run([sys.executable, "-m", "tests.bench.streaming_view", "--tokens", "120", "--rate", "200",
                          "--messages", "6"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    (record,) = [json.loads(line) for line in run.stdout.splitlines()]
    assert record["tokens"] == 120 and record["seen"] > 100  # a chunk replaced within a frame is not written
    lag = record["lag_ms"]
    assert 0 < lag["p50"] <= lag["p90"] <= lag["p99"] <= lag["max"]
    assert record["cpu_ms_per_token"] > 0 and record["stream_s"] > 0
