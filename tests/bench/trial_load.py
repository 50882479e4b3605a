"""The trial load a model file gets on its first open, against the load it protects.

Run: ``python -m tests.bench.trial_load MODEL... [--tree PATH] [--repeat 3]``. For each
file, one JSON line: the trial as ``sessions.discovery.probe`` runs it (a new process,
its Python start and imports included) and its peak memory, against a load as the app
makes it (default parameters: mmap, CPU) up to one decoded token, in a new process too,
timed from after the imports. The page cache is warmed first, so both read from memory:
the trial's share of a first open, without the disk's speed in it. The goal is a trial
of at most 10% of the load for a file of a few gigabytes; for a file of a few megabytes
the trial is the child's start, a fixed cost.

``--tree`` takes another checkout (a ``git worktree`` of the commit before, say) whose
``sessions.llama.trial_load`` the trial runs, for a before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

LOAD = """
import ctypes, sys, time
from sessions.llama.native import lib
L = lib()
t0 = time.perf_counter()
params = L.llama_model_default_params()
params.n_gpu_layers = 0
model = L.llama_model_load_from_file(sys.argv[1].encode(), params)
cp = L.llama_context_default_params()
cp.n_ctx, cp.n_batch, cp.n_ubatch = 64, 8, 8
ctx = L.llama_init_from_model(model, cp)
token = (ctypes.c_int32 * 1)(0)
assert L.llama_decode(ctx, L.llama_batch_get_one(token, 1)) == 0
print(time.perf_counter() - t0)
"""


def _env(tree: Path) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(tree), GGML_NO_BACKTRACE="1")


def trial(path: Path, tree: Path) -> tuple[float, int]:
    """Seconds of one trial as the probe runs it, and the child's peak resident memory in bytes."""
    t0 = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "sessions.llama.trial_load", str(path)], cwd=tree,
                             env=_env(tree), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"the trial of {path.name} failed (exit status {child.returncode})")
    return seconds, usage.ru_maxrss * 1024


def load(path: Path) -> float:
    """Seconds from a new process's first llama.cpp call to its first decoded token."""
    done = subprocess.run([sys.executable, "-c", LOAD, str(path)], cwd=REPO, env=_env(REPO),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, check=True)
    return float(done.stdout.split()[-1])


def measure(path: Path, tree: Path, repeat: int) -> dict:
    with path.open("rb") as handle:  # into the page cache, as a download leaves it
        while handle.read(1 << 24):
            pass
    loads = [load(path) for _ in range(repeat)]
    trials = [trial(path, tree) for _ in range(repeat)]
    trial_s = statistics.median(t for t, _ in trials)
    load_s = statistics.median(loads)
    return {
        "event": "trial load vs load",
        "model": path.name,
        "model_bytes": path.stat().st_size,
        "tree": str(tree),
        "trial_s": round(trial_s, 3),
        "trial_peak_rss_mb": round(max(rss for _, rss in trials) / 2**20, 1),
        "load_s": round(load_s, 3),
        "trial_vs_load": round(trial_s / load_s, 3),
        "goal": 0.10,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--tree", type=Path, default=REPO, help="the checkout whose trial load runs")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    for path in args.models:
        print(json.dumps(measure(path, args.tree.resolve(), args.repeat)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
