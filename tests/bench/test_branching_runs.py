"""The benchmarks run end to end on tiny models, and their figures hold together.

The benchmark is run by hand (its bench-size models take minutes); this keeps it from
rotting in between, and checks what holds on any machine: W1 evaluates only its new
tokens, a reopen restores without evaluating, its logits equal a fresh recompute.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.workload import SUITE_SCALE

REPO = Path(__file__).resolve().parents[2]


def positive(value) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0


def shown_quotient(shown: float, numerator: float, denominator: float, steps: tuple[float, float, float]) -> bool:
    """Whether ``shown`` can be ``numerator / denominator`` when all three were printed
    rounded, to ``steps`` (numerator's, denominator's, shown's; 0 for an exact figure)."""
    n_step, d_step, q_step = steps
    low = (numerator - n_step / 2) / (denominator + d_step / 2)
    high = (numerator + n_step / 2) / max(denominator - d_step / 2, 1e-12)
    return low - q_step / 2 - 1e-9 <= shown <= high + q_step / 2 + 1e-9


def check_benchmark_records(records: list[dict], *, gpu_layers: int) -> None:
    """The figures of one run of ``tests.bench.branching`` on one model hold together.

    The GPU check's rehearsal (``test_gpu_check_rehearsal``) runs the benchmark on the tiny
    gemma3 exactly as a device would, and checks its records with this: one run of the
    benchmark serves both.
    """
    events = {record["event"]: record for record in records}
    for name in ("identity", "load", "build: one prefill of the 12-turn chat", "W1 summary", "disk",
                 "reopen: restore the last branch from disk", "reopen: regenerate last reply",
                 "reopen: exactness", "reopen: continue with a new message", "turn overhead"):
        assert name in events, f"no {name!r} event"
    load = events["load"]
    assert load["cache_type"] == "f16" and load["n_gpu_layers"] == gpu_layers and load["devices"] == "CPU"
    summary = events["W1 summary"]
    assert summary["tokens_evaluated"] == summary["new_tokens"] > 0
    # Time inside llama.cpp's state calls: part of each event's time outside its decode,
    # and some wherever bytes were restored.
    w1 = [r for name, r in events.items() if name.startswith(("edit user turn", "switch back after"))]
    assert len(w1) == 6
    for record in w1:
        state, outside = record["prompt_state_seconds"], record["prompt_seconds"] - record["prompt_decode_seconds"]
        assert 0 <= state <= outside + 2e-4, record
        assert state > 0 or not record["bytes_restored"], record
    assert any(r["bytes_restored"] for r in w1)
    assert abs(summary["prompt_state_seconds"] - sum(r["prompt_state_seconds"] for r in w1)) < 2e-3
    restore = events["reopen: restore the last branch from disk"]
    assert restore["tokens_restored"] > 0 and restore["tokens_evaluated"] == 0
    timed = ("restore_seconds", "read_plus_memcpy_seconds", "read_plus_memcpy_cold_seconds",
             "new_process_restore_seconds", "new_process_read_plus_memcpy_cold_seconds", "restore_gb_per_second",
             "new_process_restore_gb_per_second", "restore_vs_read_plus_memcpy", "restore_vs_read_plus_memcpy_cold",
             "new_process_vs_read_plus_memcpy_cold")
    assert all(positive(restore[key]) for key in timed), {key: restore[key] for key in timed}
    for key in ("restore_seconds_range", "new_process_restore_seconds_range",
                "new_process_vs_read_plus_memcpy_cold_range"):
        low, high = restore[key]
        assert positive(low) and positive(high) and low <= high, (key, low, high)
    # Ratios and speeds printed beside the figures they come from (each rounded as printed).
    whole, seconds = restore["whole_state_bytes"], restore["restore_seconds"]
    assert whole > 0 and restore["bytes_read"] > 0
    assert shown_quotient(restore["restore_gb_per_second"], whole / 1e9, seconds, (0, 1e-5, 1e-3))
    assert shown_quotient(restore["new_process_restore_gb_per_second"], whole / 1e9,
                          restore["new_process_restore_seconds"], (0, 1e-5, 1e-3))
    assert shown_quotient(restore["restore_vs_read_plus_memcpy"], seconds, restore["read_plus_memcpy_seconds"],
                          (1e-5, 1e-5, 1e-2))
    assert shown_quotient(restore["restore_vs_read_plus_memcpy_cold"], seconds,
                          restore["read_plus_memcpy_cold_seconds"], (1e-5, 1e-5, 1e-2))
    assert shown_quotient(restore["bytes_read_vs_whole_state"], restore["bytes_read"], whole, (0, 0, 1e-3))
    assert restore["bytes_read_vs_whole_state"] <= restore["budget_bytes_read_vs_whole_state"]
    assert events["reopen: exactness"]["bit_identical_logits"] is True
    assert events["reopen: regenerate last reply"]["tokens_evaluated"] == 0
    check_bytes(events, w1)
    budgets = [value for record in events.values() for key, value in record.items() if key.startswith("budget_")]
    assert budgets and all(isinstance(value, int | float) for value in budgets)


def check_bytes(events: dict[str, dict], w1: list[dict]) -> None:
    """The byte counts of a run hold together (they are exact on any machine)."""
    from sessions.config.model import CheckpointConfig
    from tests.bench.overhead import TOKENS_ADDED

    build, disk, load = events["build: one prefill of the 12-turn chat"], events["disk"], events["load"]
    kv = disk["kv_bytes_per_token"]
    assert kv > disk["kv_window_bytes_per_token"] >= 0
    assert disk["kv_cells_bytes_per_token"] == pytest.approx(kv - disk["kv_window_bytes_per_token"], abs=0.1)
    # The context's own figure is the shape's plus a cell's position and sequence ids
    # (12 bytes) in each cache a token has cells in (two for a windowed model).
    assert 0 < disk["kv_cell_metadata_bytes_per_token"] <= 48
    assert kv == pytest.approx(disk["kv_bytes_per_token_from_shape"] + disk["kv_cell_metadata_bytes_per_token"])
    assert shown_quotient(disk["disk_vs_kv_of_unique_tokens"], disk["disk_bytes"], disk["unique_tokens"] * kv,
                          (0, 0.05 * disk["unique_tokens"], 1e-3))
    assert disk["unique_tokens_in_default_disk_budget"] == pytest.approx(
        CheckpointConfig().max_disk * disk["unique_tokens"] / disk["disk_bytes"], rel=1e-6)
    assert load["n_ctx"] >= disk["longest_branch_tokens"] + TOKENS_ADDED  # sized to the workload
    assert build["bytes_read"] >= build["bytes_read_deferred"] >= 0 and build["bytes_read"] > 0
    if load["kind"] != "plain":
        # The 12-turn prompt outgrows these models' rings (or changes a recurrent state at
        # every token): states are read on its way. Whether their buffers were touched in
        # time depends on the machine.
        assert build["path_reads_into_touched_memory"] + build["path_reads_into_new_memory"] > 0
    for record in w1:
        # Every event decodes tokens, whose checkpoints are then read out of the context.
        assert record["bytes_read"] > 0 and record["tokens_decoded"] >= record["tokens_evaluated"], record
        assert min(record["bytes_restored_ram"], record["bytes_restored_disk"], record["bytes_written"]) >= 0
        # A route that put bytes back wrote them into the context.
        assert bool(record["bytes_written"]) == bool(record["bytes_restored_ram"] + record["bytes_restored_disk"])
    summary = events["W1 summary"]
    for key in ("bytes_restored_ram", "bytes_restored_disk", "bytes_written", "bytes_read"):
        assert summary[key] == sum(record[key] for record in w1)


@pytest.mark.engine
def test_each_event_in_a_new_process_evaluates_only_its_new_tokens():
    """W1's six events, each in a process of its own (the model loaded again, nothing in
    RAM): on the sliding-window model every branch point comes back from disk, so the
    events evaluate what is new, plus at most one window (64 tokens here) where the
    prefill found a window not worth reading on its way (``SnapshotPolicy``)."""
    run = subprocess.run(
        [sys.executable, "-m", "tests.bench.branching", "--size", "tiny", "--arch", "gemma3", "--threads", "1",
         "--each-event", "process", "--w1-only", "--w1-scale", str(SUITE_SCALE)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    records = [json.loads(line) for line in run.stdout.splitlines()]
    events = [r for r in records if r["event"].startswith(("edit user turn", "switch back after edit"))]
    assert len(events) == 6
    for event in events:
        assert 0 < event["new_tokens"] <= event["tokens_evaluated"] <= event["new_tokens"] + 64, event
        assert event["bytes_restored"] > 0 and event["whole_state_bytes"] > 0, event
    summary = next(r for r in records if r["event"] == "W1 summary")
    assert summary["each_event"] == "process" and summary["tokens_evaluated"] <= summary["new_tokens"] + 6 * 64
    disk = next(r for r in records if r["event"] == "disk")
    assert disk["snapshot_files"] > 0 and positive(disk["disk_bytes_per_1000_unique_tokens"])
    check_bytes({r["event"]: r for r in records}, events)
    # Nothing is in RAM in a new process: every byte restored comes from disk.
    assert all(e["bytes_restored_ram"] == 0 < e["bytes_restored"] <= e["bytes_restored_disk"] for e in events)
    # Each token's window KV is kept once: the tree's files and the prefill's read-out
    # stay within their goals of the KV of the tokens concerned.
    assert disk["disk_vs_kv_of_unique_tokens"] <= disk["budget_disk_vs_kv_of_unique_tokens"]
    build = next(r for r in records if r["event"].startswith("build"))
    assert build["bytes_read_vs_kv"] <= build["budget_bytes_read_vs_kv"]


@pytest.mark.engine
def test_the_reopen_comparison_runs_on_a_tiny_model(tmp_path):
    """Two trees (here the same one twice), one restore each in a new process."""
    run = subprocess.run(
        [sys.executable, "-m", "tests.bench.reopen_ab", "--size", "tiny", "--arch", "lfm2", "--threads", "1",
         "--data", str(tmp_path / "w1"), "--repeat", "1", "--tree", str(REPO), "--cache-type", "q8_0",
         "--w1-scale", str(SUITE_SCALE)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    records = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r["tree"] for r in records] == [str(REPO), str(REPO)]
    assert all(len(r["runs_ms"]) == 1 for r in records)  # --repeat 1: one new process per tree
    assert all(positive(ms) for r in records for ms in [*r["runs_ms"], r["median_ms"], *r["quartiles_ms"]])
    w1 = json.loads((tmp_path / "w1" / "w1.json").read_text())  # kept: a second comparison skips the build
    assert w1["cache_type"] == "q8_0"  # and the restores in new processes used it: none evaluated a token


STUB_SERVER = '''
"""A stand-in for llama-server's /health and /completion: one slot whose cache keeps the
last prompt, so that ``prompt_n`` counts the tokens past the prefix it shares."""
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

port = int(sys.argv[sys.argv.index("--port") + 1])
cached = []

class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()

    def do_POST(self):
        global cached
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["prompt"]
        assert body["n_predict"] == 0 and body["cache_prompt"] is True
        shared = next((i for i, (a, b) in enumerate(zip(cached, prompt)) if a != b), min(len(cached), len(prompt)))
        cached = list(prompt)
        answer = json.dumps({"content": "", "timings": {"prompt_n": len(prompt) - shared,
                                                        "prompt_ms": 0.01 * (len(prompt) - shared)}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''


def check_server_records(records: list[dict]) -> None:
    """``tests.bench.server_compare`` against a stand-in server (CI has no llama-server):
    every prompt goes out once timed and, after an event, once more with our reply, so the
    stand-in's cache ends each event holding what our engine held.

    Run by the GPU check's rehearsal, whose server step is this comparison on the tiny
    gemma3 against ``STUB_SERVER``, as a device runs it against a real llama-server."""
    ours = {r["event"]: r for r in records if not r["event"].startswith("llama-server")}
    theirs = [r for r in records if r["event"].startswith("llama-server: ") and "summary" not in r["event"]]
    assert [r["event"] for r in theirs][0] == "llama-server: build: one prefill of the 12-turn chat"
    assert theirs[0]["server_prompt_n"] == theirs[0]["prompt_tokens"] > 0  # an empty cache: everything
    for record in theirs[1:]:
        event = ours[record["event"].removeprefix("llama-server: ")]
        assert record["our_tokens_evaluated"] == event["tokens_evaluated"]
        assert 0 < record["server_prompt_n"] <= record["prompt_tokens"]
    # Switching back after the first edit: we restore the original branch, the stand-in
    # (a cache of one prompt) processes everything after user turn 1 again.
    assert theirs[2]["event"] == "llama-server: switch back after edit 2 + next reply"
    assert theirs[2]["server_prompt_n"] > 5 * theirs[2]["our_tokens_evaluated"]
    [summary] = [r for r in records if r["event"] == "llama-server: W1 summary"]
    assert summary["server_tokens_processed"] == sum(r["server_prompt_n"] for r in theirs[1:])
    assert summary["our_tokens_evaluated"] == ours["W1 summary"]["tokens_evaluated"]
