"""The suite's CPU plugin writes a line per test and sums them (``tests.cpu_use``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cpu_use import ENV, summary

REPO = Path(__file__).resolve().parents[1]


def test_each_test_gets_its_own_and_its_childrens_cpu(tmp_path):
    tests = tmp_path / "test_busy.py"
    tests.write_text(
        "import subprocess, sys, time\n"
        "def test_spins():\n"
        "    end = time.process_time() + 0.2\n"
        "    while time.process_time() < end: pass\n"
        "def test_starts_a_process():\n"
        "    subprocess.run([sys.executable, '-c', 'import time\\nend = time.process_time() + 0.2\\n"
        "while time.process_time() < end: pass'], check=True)\n")
    log = tmp_path / "log"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.cpu_use", "-p", "no:cacheprovider",
                          "-c", os.devnull, "--rootdir", str(tmp_path), str(tests)],
                         cwd=REPO, env={**os.environ, ENV: str(log)}, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    lines = {json.loads(text)["id"].split("::")[1]: json.loads(text)
             for path in log.glob("cpu-*.jsonl") for text in path.read_text().splitlines()}
    assert lines["test_spins"]["cpu"] >= 0.2 and lines["test_spins"]["children"] < 0.1
    assert lines["test_starts_a_process"]["children"] >= 0.2
    assert "2 tests:" in summary(log)
