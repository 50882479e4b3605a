"""``.ci/run``'s RPC check, run for real with stand-ins for Python and the tools.

pip's wheel cache is keyed on the version, not on ``CMAKE_ARGS``, so a machine that once
built llama-cpp-python without RPC gets that wheel back silently. ``.ci/run`` looks for
the RPC library after installing and rebuilds without the cache when it is missing. A
real rebuild compiles llama.cpp for minutes, so here ``python3`` on the path is a script
that makes a venv of stand-ins: each logs its arguments (and ``CMAKE_ARGS``), the RPC
check answers from a marker file, and a forced reinstall writes that marker or not, as
each test says. What runs is the real script, unchanged.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PIN = next(word for word in (ROOT / "pyproject.toml").read_text().split('"') if word.startswith("llama-cpp-python=="))

PYTHON3 = r"""#!/usr/bin/env bash
# python3 -m venv DIR: a venv of stand-ins (kept if it is there: the README's command makes it again)
[ "$1 $2" = "-m venv" ] || { echo "unexpected: python3 $*" >&2; exit 2; }
mkdir -p "$3/bin"
for tool in python pip ruff mypy lint-imports; do
    cat > "$3/bin/$tool" <<EOF
#!/usr/bin/env bash
venv="$3"
tool="$tool"
EOF
    cat >> "$3/bin/$tool" <<'EOF'
if [ "$tool $1" = "python -c" ]; then  # the RPC check (its code is several lines)
    echo "python -c CODE" >> "$FAKE_LOG"
    [ -f "$venv/rpc" ]; exit $?
fi
echo "$tool $* | CMAKE_ARGS=$CMAKE_ARGS" >> "$FAKE_LOG"
case " $* " in
    *" --force-reinstall "*) [ "$FAKE_REBUILD_HAS_RPC" = 1 ] && touch "$venv/rpc" ;;
    *" install "*) [ "$FAKE_FIRST_HAS_RPC" = 1 ] && touch "$venv/rpc" ;;
esac
exit 0
EOF
    chmod +x "$3/bin/$tool"
done
"""


def run_ci(
    tmp_path: Path, *, first_has_rpc: bool, rebuild_has_rpc: bool, cmake_args: str = "",
) -> tuple[int, str, list[str]]:
    """Run ``.ci/run`` on a machine with an empty CI cache; (exit status, stderr, log lines)."""
    shims = tmp_path / "shims"
    shims.mkdir()
    python3 = shims / "python3"
    python3.write_text(PYTHON3)
    python3.chmod(python3.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "log"
    log.touch()
    env = {
        "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "LLAMACHAT_CI_CACHE": str(tmp_path / "cache"),
        "FAKE_LOG": str(log),
        "FAKE_FIRST_HAS_RPC": str(int(first_has_rpc)),
        "FAKE_REBUILD_HAS_RPC": str(int(rebuild_has_rpc)),
        "CMAKE_ARGS": cmake_args,
    }
    done = subprocess.run(["bash", str(ROOT / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stderr, log.read_text().splitlines()


def rebuilds(log: list[str]) -> list[str]:
    return [line for line in log if "--force-reinstall" in line]


@pytest.mark.parametrize("cmake_args", ["", "-DGGML_CUDA=on"])
def test_a_cached_wheel_without_rpc_is_rebuilt_with_the_flags_and_the_checks_run(tmp_path, cmake_args) -> None:
    status, stderr, log = run_ci(tmp_path, first_has_rpc=False, rebuild_has_rpc=True, cmake_args=cmake_args)
    assert status == 0, stderr
    assert "has no RPC backend (a cached wheel); rebuilding it" in stderr
    [rebuild] = rebuilds(log)
    command, flags = rebuild.split(" | CMAKE_ARGS=")
    assert command.split() == ["python", "-m", "pip", "install", "--quiet", "--no-cache-dir",
                               "--force-reinstall", "--no-deps", PIN]
    assert "-DGGML_RPC=on" in flags.split() and set(cmake_args.split()) <= set(flags.split())
    tools = [line.split()[0] for line in log[log.index(rebuild) + 1:]]
    assert tools[:4] == ["python", "ruff", "mypy", "lint-imports"]  # the second RPC check, then the checks
    assert any(line.startswith("python -m pytest") for line in log), "the README's test command did not run"


def test_a_rebuild_that_still_lacks_rpc_stops_before_the_tests(tmp_path) -> None:
    status, stderr, log = run_ci(tmp_path, first_has_rpc=False, rebuild_has_rpc=False)
    assert status == 1
    assert "was rebuilt but still has no RPC backend" in stderr
    assert len(rebuilds(log)) == 1
    assert not any(line.split()[0] in ("ruff", "mypy") or "pytest" in line for line in log)


def test_a_wheel_with_rpc_is_not_rebuilt(tmp_path) -> None:
    status, stderr, log = run_ci(tmp_path, first_has_rpc=True, rebuild_has_rpc=False)
    assert status == 0, stderr
    assert rebuilds(log) == [] and "rebuilding" not in stderr
    assert any(line.startswith("python -m pytest") for line in log)
