"""``sessions`` is the UI-free core: importing any part of it must not load Textual.

The check runs in a fresh interpreter (the test process itself has Textual loaded by
other tests) and imports every submodule found on disk, so a new module cannot slip
through by not being listed anywhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import importlib, pkgutil, sys
import sessions

culprits = []
failures = {}


def record_failure(name):
    failures.setdefault(name, repr(sys.exc_info()[1]))


def check(name):
    before = "textual" in sys.modules
    try:
        importlib.import_module(name)
    except Exception as error:
        failures.setdefault(name, repr(error))
    if not before and "textual" in sys.modules:
        culprits.append(name)


check("sessions")
count = 1
# walk_packages imports a package only after yielding it, so importing each name as it
# comes pins the blame on the module that loaded textual first.
for info in pkgutil.walk_packages(sessions.__path__, "sessions.", onerror=record_failure):
    check(info.name)
    count += 1
print("MODULES", count)
for name in culprits:
    print("TEXTUAL", name)
for name, error in failures.items():
    print("FAILED", f"{name}: {error}")
print("LOADED", "textual" in sys.modules)
"""


def test_importing_every_sessions_module_leaves_textual_out():
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    failed = [line.removeprefix("FAILED ") for line in lines if line.startswith("FAILED ")]
    culprits = [line.removeprefix("TEXTUAL ") for line in lines if line.startswith("TEXTUAL ")]
    assert not failed, "some sessions modules do not import:\n" + "\n".join(failed)
    assert not culprits, f"importing {culprits[0]} pulled textual into sessions"
    assert lines[-1] == "LOADED False", "textual was imported, but no single module was to blame"
    assert int(lines[0].split()[1]) > 1, "no sessions submodules were found"


THREADS_PROBE = """
import os, sys
import sessions.checkpoints  # its file reads import numpy
print(os.environ["OPENBLAS_NUM_THREADS"], "numpy" in sys.modules, len(os.listdir("/proc/self/task")))
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts a process's threads in /proc")
def test_the_core_imports_numpy_without_a_pool_of_blas_threads_unless_the_user_asks():
    """numpy's OpenBLAS would start a thread pool at import that spins for nothing (the
    core does no matrix work in numpy): ``sessions`` holds it to one thread, not over a
    value the user set."""
    def probe(**extra: str) -> list[str]:
        env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"} | extra
        done = subprocess.run([sys.executable, "-c", THREADS_PROBE], cwd=REPO, env=env, capture_output=True,
                              text=True, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert probe() == ["1", "True", "1"]  # numpy loaded, and no thread but the main one
    assert probe(OPENBLAS_NUM_THREADS="3")[:2] == ["3", "True"]  # the user's pool, as asked
