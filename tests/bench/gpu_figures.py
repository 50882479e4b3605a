"""The GPU check's figures, read from what its benchmarks printed (issue #32's goals).

``derive(steps)`` takes the report's steps (each benchmark's JSON lines in its
``records``) and gives:

- ``prefills``: each prefill of the 12-turn chat with and without checkpoints: the wall
  time (the real cost, wherever it is counted: on a GPU a state read can stall the
  stream), and the engine's own CPU time outside ``llama_decode``;
- ``goals``: per model, each goal's figure, the goal, and whether it was met;
- ``exactness``: per model and restore route, bit-identical or the largest difference.

Standard library only, like the rest of the check.
"""

from __future__ import annotations

PREFILL = "build: one prefill of the 12-turn chat"
BENCH_STEPS = ("branching", "server_compare", "batched_versions")


def records(steps: dict, step: str) -> list[dict]:
    return list(steps.get(step, {}).get("records", []))


def prefills(steps: dict) -> list[dict]:
    out = []
    for step in BENCH_STEPS:
        for r in records(steps, step):
            if r.get("event") != PREFILL or "no_checkpoints" not in r:
                continue
            bare, tokens = r["no_checkpoints"], r["tokens"]
            out.append({
                "step": step, "model": r["model"], "tokens": tokens,
                "wall_seconds_with_checkpoints": r["prefill_seconds"],
                "wall_seconds_without_checkpoints": bare["prefill_seconds"],
                "with_over_without": round(r["prefill_seconds"] / max(bare["prefill_seconds"], 1e-9), 4),
                "decode_seconds_with_checkpoints": r["decode_seconds"],
                "decode_seconds_without_checkpoints": bare["decode_seconds"],
                "engine_cpu_ms_outside_decode": round(r["critical_cpu_ms_per_1000_tokens"] * tokens / 1000, 3),
                "engine_cpu_ms_outside_decode_without_checkpoints":
                    round(bare["critical_cpu_ms_per_1000_tokens"] * bare["tokens"] / 1000, 3),
                "engine_wall_ms_outside_decode": round(r["critical_ms_per_1000_tokens"] * tokens / 1000, 3),
                "read_out_ms_after_the_reply": round(r["deferred_ms_per_1000_tokens"] * tokens / 1000, 3),
            })
    return out


def goal(value, target: float, at_least: bool, source: str) -> dict:
    if value is None:
        return {"value": None, "goal": target, "met": None, "from": source}
    met = value >= target if at_least else value <= target
    return {"value": value, "goal": target, "met": met, "from": source,
            "ratio_to_goal": round(value / target, 3)}


def exactness(steps: dict) -> dict:
    table: dict[str, dict] = {}
    for r in records(steps, "exactness"):
        if "route" in r:
            table.setdefault(r["model"], {})[r["route"]] = {
                key: r.get(key) for key in ("bit_identical", "max_abs_difference", "where", "route_as_expected",
                                            "tokens_evaluated", "tokens_restored", "error")}
    return table


def goals(steps: dict) -> dict:
    """Issue #32's goals on the GPU (ratios from one run), per model of the benchmarks,
    #37's (several versions at once) and #46's (a prefill with checkpoints)."""
    found: dict[tuple[str, str, str], dict] = {}
    for step in BENCH_STEPS:
        for r in records(steps, step):
            if "model" in r:
                found[step, r["model"], r.get("event", "")] = r
    out: dict[str, dict] = {}
    for model in sorted({model for _step, model, _event in found}):
        server = found.get(("server_compare", model, "llama-server: W1 summary"), {})
        regen = found.get(("branching", model, "reopen: regenerate last reply"), {})
        turn = found.get(("branching", model, "turn overhead"), {})
        out[model] = {
            "w1_branch_events_server_over_ours": goal(server.get("server_over_ours"), 5.0, True,
                                                      "server_compare: W1 summary"),
            "first_prefill_ours_over_server": goal(server.get("build_ours_over_server"), 1.1, False,
                                                   "server_compare: W1 summary"),
            "reopen_regenerate_ttft_speedup": goal(regen.get("ttft_speedup"), 10.0, True,
                                                   "branching: reopen: regenerate last reply"),
            "generation_vs_bare_decode": goal(turn.get("generation_vs_bare"), 0.95, True, "branching: turn overhead"),
        }
        prefill = [r for r in prefills(steps) if r["model"] == model and r["step"] == "branching"]
        if prefill:  # issue #46: checkpoints taken during a prefill cost at most a tenth of it
            out[model]["prefill_with_over_without"] = goal(prefill[0]["with_over_without"], 1.10, False,
                                                           "branching: prefill with and without checkpoints")
        versions = found.get(("batched_versions", model, "several versions"))
        if versions is not None:  # issue #37: 4 versions at once, through the app, at most 1.2 times one
            out[model]["versions_batch_over_one"] = goal(versions.get("app_batch_over_one"), 1.2, False,
                                                         "batched_versions: app_batch_over_one")
    routes = [route for model in exactness(steps).values() for route in model.values()]
    reopened = [r for (step, _m, event), r in found.items() if step == "branching" and event == "reopen: exactness"]
    exact = [bool(r["bit_identical"]) for r in routes] + [bool(r["bit_identical_logits"]) for r in reopened]
    out["every_route_exact"] = {
        "value": all(exact) if routes else None, "routes": len(exact), "bit_identical": sum(exact),
        "goal": "all bit-identical", "from": "exactness; branching: reopen: exactness",
    }
    return out


def derive(steps: dict) -> dict:
    return {"prefills": prefills(steps), "goals": goals(steps), "exactness": exactness(steps)}
