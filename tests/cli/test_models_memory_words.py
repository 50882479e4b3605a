"""``llamachat models`` names each model's memory in words, in the table and in --json."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sessions.synth import make_model
from tests.cli_support import models_home, run


@pytest.fixture
def made_home(tmp_path, monkeypatch):
    folder = models_home(tmp_path, monkeypatch)
    for arch in ("qwen35", "gemma4", "mamba2"):
        shutil.copy(make_model(arch), folder / f"{arch}.gguf")
    return folder


def test_models_names_the_memory_in_words(capsys, made_home):
    code, out, _ = run(capsys, "models")
    assert code == 0
    rows = {Path(row.split()[-1]).name: row for row in out.splitlines()[1:]}
    assert "hybrid: DeltaNet + attention" in rows["qwen35.gguf"]
    assert "sliding window 64 (1:4), 5 layers reuse KV" in rows["gemma4.gguf"]
    assert "recurrent: Mamba-2" in rows["mamba2.gguf"]

    code, out, _ = run(capsys, "models", "--json")
    cards = {Path(card["path"]).name: card for card in json.loads(out)}
    assert (cards["qwen35.gguf"]["memory_kind"], cards["qwen35.gguf"]["memory"]) == \
        ("hybrid", "hybrid: DeltaNet + attention")
