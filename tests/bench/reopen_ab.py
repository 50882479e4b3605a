"""Reopen restores of W1's last branch, each in a new process, alternating source trees.

Run: ``python -m tests.bench.reopen_ab [--arch gemma3] [--data DIR] [--repeat 9]
[--tree PATH ...]``. It builds W1's session once into ``DIR`` (kept, so later runs skip
the build), then for each repeat starts one new process per source tree that loads the
model, opens the session and restores the last branch from disk, and prints one JSON
line per tree: the median restore time, its quartiles and every run.

For a change to the restore path: the development machine's restore of the same bytes
swings by a third between minutes, far more than most changes, so compare code side by
side, alternating, in new processes. ``--tree`` takes another checkout (a ``git
worktree`` of the commit before, say) whose ``tests.bench.branching.Bench`` is used in
its processes; the checkpoint files must be of a format both trees read.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]


def build(arch: str, size: str, data: Path, threads: int, ngl: int | str = 0, cache_type: str = "f16") -> dict:
    """W1's session for ``arch`` in ``data`` (made once): the session and leaf to restore."""
    marker = data / "w1.json"
    if marker.exists():
        return json.loads(marker.read_text())
    from tests.bench.branching import Bench, models

    data.mkdir(parents=True, exist_ok=True)
    path = dict(models(argparse.Namespace(arch=[arch], model=[], size=size)))[arch]
    bench = Bench(arch, path, threads, 32, data, ngl=ngl, cache_type=cache_type)
    bench.from_scratch = False  # the build's own figures are not wanted here
    with contextlib.redirect_stdout(sys.stderr):
        w1 = bench.run_w1()
    bench.close()
    return keep_w1(data, w1, path, ngl, cache_type)


def keep_w1(data: Path, w1: dict, model: Path, ngl: int | str = 0, cache_type: str = "f16") -> dict:
    """Note in ``data`` (a bench's folder) which session, leaf and model the restores take,
    the layers offloaded and the cache type (the checkpoints are only found with the same)."""
    w1 = {**w1, "model": str(model), "ngl": ngl, "cache_type": cache_type}
    (data / "w1.json").write_text(json.dumps(w1))
    return w1


def restores_in_new_processes(data: Path, threads: int, repeat: int, trees: list[Path],
                              after_each: Callable[[], None] | None = None) -> list[list[float]]:
    """Seconds of each restore of W1's last branch, per tree: ``repeat`` new processes each,
    the trees taken in turn (so that the machine's slow minutes fall on all of them).

    ``after_each`` runs right after each process ends: a reference measured beside each
    restore, so that restore and reference meet the same minute of the machine."""
    runs: list[list[float]] = [[] for _ in trees]
    for _ in range(repeat):
        for tree, seconds in zip(trees, runs, strict=True):
            command = [sys.executable, str(HERE), "--data", str(data), "--threads", str(threads),
                       "--child", str(tree)]
            out = subprocess.run(command, capture_output=True, text=True, env=child_env(tree, data))
            if out.returncode != 0:
                raise SystemExit(f"{tree}: the restore failed:\n{out.stderr[-3000:]}")
            record = json.loads(out.stdout.splitlines()[-1])
            if record["tokens_evaluated"]:
                raise SystemExit(f"{tree}: the restore evaluated {record['tokens_evaluated']} tokens")
            seconds.append(record["restore_seconds"])
            if after_each is not None:
                after_each()
    return runs


def child_env(tree: Path, data: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    """A restore process's environment: the tree's code first, then whatever the caller's
    path held (on a device machine, the folder the carried wheels went to)."""
    environ = dict(os.environ if environ is None else environ)
    path = os.pathsep.join(p for p in (str(tree), environ.get("PYTHONPATH", "")) if p)
    return {**environ, "PYTHONPATH": path, "LLAMACHAT_CACHE_DIR": str(data / "cache")}


def child(tree: Path, data: Path, threads: int) -> None:
    """In a new process, with ``tree``'s code: load, open the session, restore; print seconds."""
    sys.path.insert(0, str(tree))
    from tests.bench.branching import Bench

    w1 = json.loads((data / "w1.json").read_text())
    with contextlib.redirect_stdout(sys.stderr):  # written out: an older tree lacks restore_last_branch
        cache_type = w1.get("cache_type", "f16")  # named only when not the default, which every tree has
        bench = Bench("ab", Path(w1["model"]), threads, 32, data, ngl=w1.get("ngl", 0),
                      **({"cache_type": cache_type} if cache_type != "f16" else {}))
        bench.ctl.open_session(w1["session"])
        t0 = time.perf_counter()
        result = bench.ctl.warm(w1["leaf"])
        seconds = time.perf_counter() - t0
        bench.close()
    print(json.dumps({"restore_seconds": seconds, "tokens_evaluated": result.tokens_evaluated}))


def main(argv: list[str] | None = None) -> int:
    from sessions.cli.arguments import gpu_layers
    from sessions.synth import SIZES
    from tests.bench import workload

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="gemma3", choices=["llama", "gemma3", "lfm2", "mamba"])
    parser.add_argument("--data", type=Path, help="where W1's session is kept (default: the cache folder)")
    parser.add_argument("--size", choices=SIZES, default="bench",
                        help="made model's size (tiny: a quick check that the comparison runs)")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--tree", type=Path, action="append", default=[], help="another checkout to compare")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--ngl", type=gpu_layers, default=0, help="layers offloaded to this machine's GPUs")
    parser.add_argument("--cache-type", default="f16", help="K and V cache type of a new build (-ctk, -ctv)")
    workload.add_scale_flag(parser)
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    workload.set_scale(args.w1_scale)
    from sessions import paths

    scaled = "" if args.w1_scale == 1 else f"-at-{args.w1_scale}"  # a build kept per scale
    data = args.data or paths.cache_dir() / "bench" / f"reopen-{args.arch}-{args.size}{scaled}"
    os.environ["LLAMACHAT_CACHE_DIR"] = str(data / "cache")
    os.environ.setdefault("LLAMACHAT_MODEL_CACHE", str(paths.made_models_dir()))
    if args.child is not None:
        child(args.child, data, args.threads)
        return 0
    build(args.arch, args.size, data, args.threads, args.ngl, args.cache_type)
    trees = [REPO, *(tree.resolve() for tree in args.tree)]
    runs = restores_in_new_processes(data, args.threads, args.repeat, trees)
    for tree, seconds in zip(trees, runs, strict=True):
        q1, median, q3 = statistics.quantiles(seconds, n=4) if len(seconds) > 1 else (seconds[0],) * 3
        print(json.dumps({"tree": str(tree), "arch": args.arch, "median_ms": round(median * 1e3, 2),
                          "quartiles_ms": [round(q1 * 1e3, 2), round(q3 * 1e3, 2)],
                          "runs_ms": [round(s * 1e3, 2) for s in seconds]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
