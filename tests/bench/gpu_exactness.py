"""Every restore route against a from-scratch recompute, on the made models, as JSON lines.

Run: ``python -m tests.bench.gpu_exactness [--arch llama gemma3 lfm2 mamba] [--size gpu]
[--ngl all] [--threads N]``. It is the GPU's counterpart of ``tests/engine/test_exactness.py``:
on a GPU the kernels llama.cpp picks depend on the batch, so a route that groups tokens
differently from a recompute would show here and nowhere on a CPU.

For each model it loads the file as llamachat does (``--ngl`` layers offloaded), then
takes each route (live reuse, a switch back restored from RAM, segments shared with a
sibling, a restore from disk in new objects and from a new process, a checkpoint inside a
long message, a generated reply continued, an edit near the start of a branch longer than
the sliding window's ring, a switch back on that long branch, a reopen with its reply and
a regenerate after it) and compares the logits after the branch, and after each of
``exactness_lab.GREEDY`` greedy tokens past it, with a fresh context that evaluates the whole branch
from token 0. Each route's line says whether all of them are bit-identical, else the
largest difference and where it is (which step, which vocabulary entry); and whether the
route did what it stands for (``route_as_expected``: the tokens it evaluated), so that a
route that silently fell back to a recompute is not taken for an exact restore.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tests.bench.exactness_lab import Lab, check, flat, generate

if TYPE_CHECKING:
    from sessions.branching.branch_engine import PrepareResult

WINDOW = {"tiny": 64, "bench": 512, "gpu": 1024}
"""gemma3's sliding window per size, as ``tests.bench.branching`` makes its models."""


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


Route = Callable[[Lab], list[tuple[str, "PrepareResult", dict, str, bool]]]
"""A route: (name, prepare result, comparison, what it should have done, whether it did)."""


def live_reuse(lab: Lab):
    with lab.store() as store:
        engine = lab.branch_engine(store)
        base = lab.msgs(0, 1, 2)
        engine.prepare(*flat(base))
        result, cmp = check(lab, engine, base + lab.msgs(3))
        engine.ctx.close()
    new = len(lab.short[3])
    return [("live reuse", result, cmp, f"keeps the live branch, evaluates {new}", result.tokens_evaluated == new)]


def ram_switch_back(lab: Lab):
    with lab.store() as store:
        engine = lab.branch_engine(store)
        engine.prepare(*flat(lab.msgs(0, 1, 2, 3)))
        engine.prepare(*flat(lab.msgs(0, 5)))
        result, cmp = check(lab, engine, lab.msgs(0, 1, 2, 3))
        engine.ctx.close()
    return [("switch back, from RAM", result, cmp, "evaluates 0", result.tokens_evaluated == 0)]


def sibling(lab: Lab):
    with lab.store() as store:
        engine = lab.branch_engine(store)
        engine.prepare(*flat(lab.msgs(0, 1, 2, 3)))
        engine.prepare(*flat(lab.msgs(0, 6)))
        result, cmp = check(lab, engine, lab.msgs(0, 1, 2, 4))
        engine.ctx.close()
    new = len(lab.short[4])
    return [("sibling shares segments", result, cmp, f"evaluates {new}", result.tokens_evaluated == new)]


def disk(lab: Lab):
    folder = lab.root / "disk-route"
    with lab.store(folder) as first:
        engine = lab.branch_engine(first)
        engine.prepare(*flat(lab.msgs(0, 1, 2, 3)))
        first.flush()
        engine.ctx.close()
    with lab.store(folder) as second:
        engine = lab.branch_engine(second)
        result, cmp = check(lab, engine, lab.msgs(0, 1, 2, 3, 4))
        engine.ctx.close()
    new = len(lab.short[4])
    plan = result.plan
    tiers = {info.tier for info in plan.restore} | {s.tier for s in (plan.rewind, plan.snapshot) if s is not None}
    cmp["tiers"] = sorted(tiers)
    return [("restore from disk, new objects", result, cmp, f"all from disk, evaluates {new}",
             result.tokens_evaluated == new and tiers == {"disk"})]


def new_process(lab: Lab):
    folder = lab.root / "process-route"
    child = [sys.executable, "-m", "tests.bench.gpu_exactness", "--child-writes", str(folder),
             "--model-path", str(lab.path), "--ngl", str(lab.ngl), "--threads", str(lab.threads)]
    subprocess.run(child, check=True, cwd=Path(__file__).resolve().parents[2], stdout=subprocess.DEVNULL)
    with lab.store(folder) as store:
        engine = lab.branch_engine(store)
        result, cmp = check(lab, engine, lab.msgs(0, 1, 2, 3, 5))
        engine.ctx.close()
    new = len(lab.short[5])
    return [("restore after a new process wrote it", result, cmp, f"evaluates {new}", result.tokens_evaluated == new)]


def inside_long_message(lab: Lab):
    from sessions.branching.snapshot_policy import SnapshotPolicy

    with lab.store() as store:
        # A state at every cut (a hybrid's spacing by cost is 256 tokens or more): the
        # route that restores one inside the message, the same on any machine.
        engine = lab.branch_engine(store, interval=32, policy=SnapshotPolicy(every_boundary=True))
        step = engine.interval
        long = lab.long[0]
        engine.prepare(*flat([lab.short[0], long]))
        edited = long[: 3 * step + 5] + lab.short[4]
        result, cmp = check(lab, engine, [lab.short[0], edited], interval=32)
        engine.ctx.close()
    return [("checkpoint inside a long message", result, cmp, f"evaluates {len(edited) - 3 * step}",
             result.tokens_evaluated == len(edited) - 3 * step)]


def generated_reply(lab: Lab):
    with lab.store() as store:
        engine = lab.branch_engine(store)
        msgs = lab.msgs(0, 1)
        reply = generate(engine, engine.prepare(*flat(msgs)).logits, 40)
        engine.prepare(*flat(lab.msgs(0, 6)))
        result, cmp = check(lab, engine, msgs + [reply] + lab.msgs(3), stepped=[False, False, True, False])
        engine.ctx.close()
    new = len(lab.short[3])
    return [("generated reply, then a follow-up", result, cmp, f"evaluates {new}", result.tokens_evaluated == new)]


def edit_near_start_of_long_branch(lab: Lab):
    with lab.store() as store:
        engine = lab.branch_engine(store)
        engine.prepare(*flat(lab.long_branch()))
        slid = engine.ctx.pos_min() > len(lab.short[0])
        result, cmp = check(lab, engine, lab.msgs(0, 6))
        engine.ctx.close()
    new = len(lab.short[6])
    cmp["window_slid_past_the_edit"] = slid
    return [("edit near the start of a long branch", result, cmp, f"evaluates {new}", result.tokens_evaluated == new)]


def long_switch_back(lab: Lab):
    with lab.store() as store:
        engine = lab.branch_engine(store)
        original = lab.long_branch()
        engine.prepare(*flat(original))
        engine.prepare(*flat(original[:3] + [lab.short[6]]))
        result, cmp = check(lab, engine, original + lab.msgs(5))
        engine.ctx.close()
    new = len(lab.short[5])
    return [("switch back on a long branch", result, cmp, f"evaluates {new}", result.tokens_evaluated == new)]


def reopen_and_regenerate(lab: Lab):
    folder = lab.root / "reopen-route"
    prompt = lab.long_branch()
    with lab.store(folder) as store:
        engine = lab.branch_engine(store)
        reply = generate(engine, engine.prepare(*flat(prompt), reply_follows=True).logits, 20)
        engine.ctx.close()
    with lab.store(folder) as store:
        engine = lab.branch_engine(store)
        whole = prompt + [reply]
        reopened, cmp_open = check(lab, engine, whole, stepped=[False] * len(prompt) + [True])
        back, cmp_back = check(lab, engine, prompt)
        engine.ctx.close()
    return [("reopen a branch with its reply", reopened, cmp_open, "restores all, evaluates 0",
             reopened.tokens_evaluated == 0 and reopened.tokens_restored == len(flat(whole)[0])),
            ("regenerate after reopening", back, cmp_back, "evaluates 0", back.tokens_evaluated == 0)]


ROUTES: list[Route] = [live_reuse, ram_switch_back, sibling, disk, new_process, inside_long_message,
                       generated_reply, edit_near_start_of_long_branch, long_switch_back, reopen_and_regenerate]


def run_model(arch: str, path: Path, ngl, threads: int) -> None:
    with tempfile.TemporaryDirectory(prefix="llamachat-exactness-") as tmp:
        lab = Lab(arch, path, ngl, threads, Path(tmp))
        emit({"model": arch, "event": "load", "kind": lab.kind.value, "seconds": round(lab.load_seconds, 3),
              **lab.placement()})
        exact = total = expected = 0
        try:
            for route in ROUTES:
                t0 = time.perf_counter()
                try:
                    outcomes = route(lab)
                except Exception as error:  # one broken route must not hide the others' figures
                    emit({"model": arch, "route": route.__name__, "error": f"{type(error).__name__}: {error}",
                          "traceback": traceback.format_exc(limit=4)})
                    total += 1
                    continue
                seconds = (time.perf_counter() - t0) / len(outcomes)
                for name, result, cmp, should, did in outcomes:
                    total += 1
                    exact += cmp["bit_identical"]
                    expected += did
                    emit({"model": arch, "route": name, **cmp, "tokens_kept": result.plan.tokens_kept,
                          "tokens_restored": result.tokens_restored, "tokens_evaluated": result.tokens_evaluated,
                          "expected": should, "route_as_expected": did, "seconds": round(seconds, 3)})
        finally:
            lab.close()
        emit({"model": arch, "event": "summary", "routes": total, "bit_identical": exact,
              "routes_as_expected": expected})


def child_writes(folder: Path, path: Path, ngl, threads: int) -> None:
    """The new-process route's writer: the first four messages' checkpoints into ``folder``."""
    with tempfile.TemporaryDirectory(prefix="llamachat-exactness-") as tmp:
        lab = Lab("child", path, ngl, threads, Path(tmp))
        try:
            with lab.store(folder) as store:
                engine = lab.branch_engine(store)
                engine.prepare(*flat(lab.msgs(0, 1, 2, 3)))
                store.flush()
                engine.ctx.close()
        finally:
            lab.close()


def main(argv: list[str] | None = None) -> int:
    from sessions.cli.arguments import gpu_layers
    from sessions.synth import ARCHS, SIZES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # By default the architectures the engine's exactness suite covers; the others on request.
    parser.add_argument("--arch", nargs="*", default=["llama", "gemma3", "lfm2", "mamba"], choices=ARCHS)
    parser.add_argument("--size", choices=SIZES, default="gpu")
    parser.add_argument("--ngl", type=gpu_layers, default="all", help="layers offloaded: a number, auto or all")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--child-writes", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--model-path", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_writes is not None:
        child_writes(args.child_writes, args.model_path, args.ngl, args.threads)
        return 0
    from sessions import paths
    from sessions.synth import make_model

    os.environ.setdefault("LLAMACHAT_MODEL_CACHE", str(paths.made_models_dir()))
    for arch in args.arch:
        run_model(arch, make_model(arch, args.size, swa_window=WINDOW[args.size]), args.ngl, args.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
