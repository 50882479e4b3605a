"""The GPU check rehearses on this machine: every step, every field, with real figures.

A device is lent rarely and for minutes, so the check it runs must not rot in between:
here it runs as ``--rehearse`` (no CUDA, tiny models, llama.cpp configured from the pack
but not compiled, a stand-in llama-server) from a pack made by ``gpu_pack.sh``, and the
report must hold what a device run's holds.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.gpu_check import ARCHS, REHEARSAL_BENCH_ARCHS, REHEARSAL_EXACTNESS_ARCHS, REHEARSAL_W1_SCALE, STEPS
from tests.bench.gpu_run import Runner, TimedOut
from tests.bench.test_branching_runs import STUB_SERVER, check_benchmark_records, check_server_records

REPO = Path(__file__).resolve().parents[2]


def real(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0


@pytest.fixture(scope="module")
def pack(tmp_path_factory) -> Path:
    """A pack as the device gets it (the sources and wheels come from a cache after the first)."""
    folder = tmp_path_factory.mktemp("gpu") / "pack"
    made = subprocess.run(["bash", str(REPO / "tests" / "bench" / "gpu_pack.sh"), str(folder)], cwd=REPO,
                          capture_output=True, text=True, timeout=900)
    assert made.returncode == 0, made.stderr[-2000:]
    assert "MiB of 64" in made.stdout
    return folder


@pytest.mark.engine
def test_the_rehearsal_runs_every_step_and_reports_real_figures(pack, tmp_path):
    server = tmp_path / "llama-server"
    server.write_text(f"#!{sys.executable}\n{STUB_SERVER}")
    server.chmod(0o755)
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    run = subprocess.run(
        [sys.executable, "-m", "tests.bench.gpu_check", "--rehearse", "--pack", str(pack), "--out", str(out),
         "--work", str(tmp_path / "work"), "--threads", "1", "--jobs", "1", "--server", str(server)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,  # the rehearsal's budget is 600
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert (out / "gpu_check.log").stat().st_size > 0
    assert report["mode"] == "rehearse" and report["model_size"] == "tiny" and report["finished"] is True
    steps = report["steps"]
    assert list(steps) == list(STEPS)
    for name, entry in steps.items():
        expected = "skipped" if name == "build" else "ok"
        assert entry["status"] == expected, (name, entry.get("reason"))
        assert isinstance(entry["seconds"], float) and entry["seconds"] >= 0
        assert isinstance(entry["cpu_seconds"], float) and entry["cpu_seconds"] >= 0
    assert "rehearsal" in steps["build"]["reason"] and steps["build"]["replaced_by"]

    env_step = steps["environment"]
    assert env_step["cmake"] and env_step["ninja"] and Path(env_step["libstdcxx_preloaded"]).is_file()
    assert env_step["pack"]["llama_cpp_python"] == "0.3.36" and real(env_step["pack"]["bytes"])
    unpack = steps["unpack"]
    assert unpack["wheels_installed"] == sorted(p.name for p in (pack / "wheels").glob("*.whl"))
    site = Path(unpack["site"])
    assert (site / "textual").is_dir() and (site / "isal").is_dir() and (site / "gguf").is_dir()
    assert unpack["source_files"] > 1000
    units = steps["configure"]["compile_units"]
    assert units.get("CXX", 0) > 100 and "CUDA" not in units and steps["configure"]["link_steps"] > 0
    install = steps["install"]
    assert install["llama_cpp"] == "0.3.36" and install["system_info"]
    assert [d["name"] for d in install["devices"]] == ["CPU"]
    assert set(steps["models"]["models"]) == set(ARCHS)
    assert all(real(m["bytes"]) and m["seconds"] >= 0 for m in steps["models"]["models"].values())

    exactness = report["figures"]["exactness"]
    assert set(exactness) == set(REHEARSAL_EXACTNESS_ARCHS)
    for model, routes in exactness.items():
        assert len(routes) >= 10, model
        for name, route in routes.items():
            assert route["error"] is None, (model, name, route["error"])
            assert route["bit_identical"] is True and route["max_abs_difference"] == 0.0, (model, name)
            assert route["route_as_expected"] is True, (model, name)

    prefills = report["figures"]["prefills"]
    assert {(p["step"], p["model"]) for p in prefills} == {(s, m) for s in ("branching", "server_compare")
                                                          for m in REHEARSAL_BENCH_ARCHS}
    for p in prefills:
        for key in ("tokens", "wall_seconds_with_checkpoints", "wall_seconds_without_checkpoints",
                    "with_over_without", "engine_cpu_ms_outside_decode", "engine_wall_ms_outside_decode"):
            assert real(p[key]), (p["step"], p["model"], key, p[key])

    # The branching step is the benchmark as a user runs it (``--ngl all``, which a CPU-only
    # build takes as every layer on the CPU): its figures hold together as on any run.
    check_benchmark_records(steps["branching"]["records"], gpu_layers=-1)  # -1: every layer
    [load] = [r for r in steps["branching"]["records"] if r["event"] == "load"]
    assert load["w1_scale"] == REHEARSAL_W1_SCALE < 1  # a shorter chat: the rehearsal checks the kit
    check_server_records(steps["server_compare"]["records"])
    [versions] = steps["batched_versions"]["records"]
    assert versions["model"] == "gemma3" and versions["versions"] == 4 and versions["n_gpu_layers"] == -1
    assert real(versions["batch_seconds"]) and real(versions["one_seconds"]) and real(versions["settle_seconds"])
    assert real(versions["app_batch_seconds"]) and real(versions["app_settle_seconds"])

    goals = report["figures"]["goals"]
    for model in REHEARSAL_BENCH_ARCHS:
        for name, g in goals[model].items():
            assert real(g["value"]) and isinstance(g["met"], bool), (model, name, g)
    every = goals["every_route_exact"]
    assert every["value"] is True and every["bit_identical"] == every["routes"] >= len(exactness) * 11 + 1


def test_a_step_past_its_limit_is_killed_and_keeps_what_it_printed(tmp_path):
    """A benchmark that hangs after its first figure: stopped at the limit, its process
    group killed, the figure kept in the report on disk."""
    report = {"steps": {"branching": {"status": "pending"}}}
    runner = Runner(tmp_path / "out", report, budget=60.0, derive=lambda steps: {})
    keep = runner.records_into(report["steps"]["branching"])
    pids = []

    def take(line: str) -> None:
        assert runner.child is not None
        pids.append(runner.child.pid)
        keep(line)

    hang = ("import json, os\nr, w = os.pipe()\nprint(json.dumps({'model': 'm', 'event': 'first'}), flush=True)\n"
            "os.read(r, 1)\n")  # nothing ever writes to w: blocks until killed
    with pytest.raises(TimedOut):
        runner.run([sys.executable, "-c", hang], timeout=3, cwd=tmp_path, on_line=take)
    runner.close()
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(pids[0], 0)
    on_disk = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    assert on_disk["steps"]["branching"]["records"] == [{"model": "m", "event": "first"}]
    assert on_disk["finished"] is True
