"""The "continue from here" benchmark runs end to end on tiny models, and says what holds on
any machine: what each memory kind evaluates at a cut in the middle of a reply."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.engine
def test_the_continue_from_benchmark_runs_on_tiny_models():
    run = subprocess.run(
        [sys.executable, "-m", "tests.bench.continue_from", "--size", "tiny", "--turns", "2", "--reply", "40",
         "--threads", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    records = {r["arch"]: r for r in map(json.loads, run.stdout.splitlines()) if "arch" in r}
    assert set(records) == {"llama", "gemma3", "lfm2", "mamba"}
    for arch, record in records.items():
        cut, prompt = record["cut_at"], record["prompt_tokens"]
        assert record["reply_tokens"] == 40 and cut == 20, arch
        assert record["from_scratch"]["tokens_evaluated"] == prompt + cut, arch
        same, reopened = record["same_objects"]["tokens_evaluated"], record["reopened"]["tokens_evaluated"]
        if arch in ("llama", "gemma3"):
            # Right after the reply, attention cells (and a window still in the ring) are cut
            # at the token, and the last kept one is decoded again for its logits.
            assert same == 1, arch
        else:
            # A recurrent state goes back to the nearest snapshot before the cut.
            assert 1 <= same <= cut, arch
        if arch == "llama":
            # Reopened, plain attention restores the whole reply, then cuts it.
            assert reopened == 1 and record["reopened"]["whole_reply_restored_first"] == prompt + 40
        else:
            # A window or a recurrent state at the reply's end cannot go back to the cut:
            # the nearest snapshot before it, then the rest decoded again.
            assert 1 <= reopened <= cut and "whole_reply_restored_first" not in record["reopened"], arch
