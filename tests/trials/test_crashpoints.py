"""The crash hook: armed points kill the process at the n-th pass, and only then.

A crash trial that believes it killed the program mid-commit while the hook silently did
nothing would prove nothing, so the hook itself is tested in a child process: it must
die by SIGKILL exactly at the armed pass, run to the end when unarmed, and refuse a
malformed spec instead of disarming itself.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sessions import crashpoints
from sessions.crashpoints import POINTS, CrashSpecError, parse_spec

REPO = Path(__file__).resolve().parents[2]
CHILD = """
from sessions.crashpoints import crashpoint
for i in range(1, 6):
    print(i, flush=True)
    crashpoint("store.after_commit")
print("done", flush=True)
"""


def run_child(spec: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != crashpoints.ENV_VAR}
    if spec is not None:
        env[crashpoints.ENV_VAR] = spec
    return subprocess.run([sys.executable, "-c", CHILD], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


def test_armed_point_kills_at_the_nth_pass():
    done = run_child("store.after_commit:3")
    assert done.returncode == -signal.SIGKILL
    assert done.stdout.split() == ["1", "2", "3"]


def test_other_points_and_no_spec_do_nothing():
    for spec in (None, "", "decode.batch:1"):
        done = run_child(spec)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split()[-1] == "done"


def test_a_count_never_reached_lets_the_process_finish():
    done = run_child("store.after_commit:6")
    assert done.returncode == 0 and done.stdout.split() == ["1", "2", "3", "4", "5", "done"]


@pytest.mark.parametrize("spec", ["decode.batc:1", "decode.batch", "decode.batch:0", "decode.batch:x"])
def test_malformed_spec_is_refused_in_plain_words(spec):
    with pytest.raises(CrashSpecError, match="LLAMACHAT_CRASH_AT"):
        parse_spec(spec)


def test_spec_with_several_points():
    assert parse_spec(" decode.batch:2 , store.before_commit:1 ") == {
        "decode.batch": 2, "store.before_commit": 1}
    assert set(POINTS) >= {"decode.batch", "generate.token", "checkpoint.before_rename",
                           "checkpoint.after_rename", "store.before_commit", "store.after_commit"}


def test_arm_resets_counts_and_disarms(monkeypatch):
    killed: list[str] = []
    monkeypatch.setattr(crashpoints, "_die", lambda: killed.append("x"))
    try:
        crashpoints.arm("generate.token:2")
        for _ in range(4):
            crashpoints.crashpoint("generate.token")
        assert killed == ["x"]
        crashpoints.arm("")
        crashpoints.crashpoint("generate.token")
        crashpoints.crashpoint("generate.token")
        assert killed == ["x"]
    finally:
        crashpoints.arm(os.environ.get(crashpoints.ENV_VAR, ""))
