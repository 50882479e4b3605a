"""A restore process started by ``reopen_ab`` finds the caller's packages as well as the tree's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.bench.reopen_ab import child_env


def test_a_restore_process_imports_from_the_tree_and_from_the_callers_path(tmp_path: Path) -> None:
    # As on a device machine: the carried wheels are on the caller's PYTHONPATH only.
    site, tree = tmp_path / "site", tmp_path / "tree"
    site.mkdir()
    tree.mkdir()
    (site / "carried_wheel.py").write_text("WHERE = 'site'\n")
    (tree / "tree_code.py").write_text("WHERE = 'tree'\n")
    environ = {**os.environ, "PYTHONPATH": str(site)}
    env = child_env(tree, tmp_path / "data", environ)
    probe = "import carried_wheel, tree_code; print(carried_wheel.WHERE, tree_code.WHERE)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["site", "tree"]
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(tree)  # the tree's code wins
    assert env["LLAMACHAT_CACHE_DIR"] == str(tmp_path / "data" / "cache")
