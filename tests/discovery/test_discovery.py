"""The search of the usual model folders, split models included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sessions.config import Config
from sessions.discovery import ModelFileError, discover_models, read_model_card, search_roots
from sessions.memory_kind import MemoryKind
from tests.gguf_support import make_gguf

# --- split models ------------------------------------------------------------------


def _split_model(folder: Path) -> list[Path]:
    tensors = {f"blk.{i}.weight": ((4, 32), "F32") for i in range(5)}
    make_gguf(folder / "big.gguf", tensors=tensors, split_max_tensors=2)
    parts = sorted(folder.glob("big-*-of-*.gguf"))
    assert len(parts) == 3
    return parts


def test_split_model_card_covers_every_part(tmp_path):
    parts = _split_model(tmp_path)
    card = read_model_card(parts[0])
    assert (card.split_index, card.split_count) == (0, 3)
    assert card.name == "Tiny"
    assert card.file_size == sum(p.stat().st_size for p in parts)
    assert card.parameter_count == 5 * 4 * 32
    assert card.readable and card.missing_parts == ()
    parts[2].unlink()
    broken = read_model_card(parts[0])
    assert broken.missing_parts == (parts[2].name,)
    assert "missing" in broken.error


def test_discovery_folds_split_parts(home, tmp_path):
    parts = _split_model(tmp_path / "models")
    cards = discover_models(Config(model_dirs=[str(tmp_path / "models")]))
    assert [c.path for c in cards] == [parts[0]]
    parts[0].unlink()
    orphans = discover_models(Config(model_dirs=[str(tmp_path / "models")]))
    assert {c.path for c in orphans} == set(parts[1:])
    assert all("first part" in c.error for c in orphans)


# --- discovery ---------------------------------------------------------------------


def test_search_roots_follow_each_tools_variables(home, monkeypatch, tmp_path):
    default = {(r.source, r.path) for r in search_roots(["~/models"])}
    assert default == {
        ("config", home / "models"),
        ("huggingface", home / ".cache" / "huggingface" / "hub"),
        ("lmstudio", home / ".lmstudio" / "models"),
        ("lmstudio", home / ".cache" / "lm-studio" / "models"),
        ("llama.cpp", home / ".cache" / "llama.cpp"),
    }
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("LLAMA_CACHE", str(tmp_path / "lc"))
    monkeypatch.setenv("LMSTUDIO_MODELS_DIR", str(tmp_path / "lms"))
    roots = {(r.source, r.path) for r in search_roots()}
    assert ("huggingface", tmp_path / "hf" / "hub") in roots
    assert ("llama.cpp", tmp_path / "lc") in roots
    assert ("lmstudio", tmp_path / "lms") in roots
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub2"))
    assert ("huggingface", tmp_path / "hub2") in {(r.source, r.path) for r in search_roots()}


def test_discovers_models_in_every_known_place(home, tmp_path, shared_dir):
    hub = home / ".cache" / "huggingface" / "hub" / "models--org--repo"
    blob = make_gguf(hub / "blobs" / "0123abcd", name="Hub Model", file_type=1)
    snapshot = hub / "snapshots" / "abc123" / "sub"
    snapshot.mkdir(parents=True)
    (snapshot / "hub-model.gguf").symlink_to(blob)
    make_gguf(home / ".lmstudio" / "models" / "pub" / "repo" / "lms.gguf", name="Alpha LMS")
    make_gguf(home / ".cache" / "lm-studio" / "models" / "old.gguf", name="old lms")
    make_gguf(home / ".cache" / "llama.cpp" / "org_repo_cpp.gguf", name="Cpp Cache", arch="mamba")
    mine = tmp_path / "mine"
    make_gguf(mine / "deep" / "er" / "own.gguf", name="Own")
    (mine / "link.gguf").symlink_to(mine / "deep" / "er" / "own.gguf")
    (mine / "broken.gguf").write_bytes(b"not a model at all")
    make_gguf(mine / "proj.gguf", name="Projector", model_type="mmproj")
    (mine / "README.md").write_text("not a model")
    outside = make_gguf(tmp_path / "elsewhere" / "chosen.gguf", name="Chosen")

    cards = discover_models(Config(model_dirs=[str(mine)], model=str(outside)))
    by_name = {c.name: c for c in cards}
    assert [c.name for c in cards] == sorted(by_name, key=str.casefold)
    assert set(by_name) == {
        "Hub Model", "Alpha LMS", "old lms", "Cpp Cache", "Own", "Chosen", "broken"}
    assert by_name["Hub Model"].source == "huggingface"
    assert by_name["Hub Model"].path == snapshot / "hub-model.gguf"
    assert by_name["Hub Model"].quantization == "F16"
    assert by_name["Alpha LMS"].source == "lmstudio"
    assert by_name["Cpp Cache"].source == "llama.cpp"
    assert by_name["Cpp Cache"].memory_kind is MemoryKind.RECURRENT
    assert by_name["Chosen"].source == "config"
    assert not by_name["broken"].readable
    assert "not a GGUF file" in by_name["broken"].error
    assert by_name["broken"].file_size == len(b"not a model at all")
    assert sum(1 for c in cards if c.name == "Own") == 1

    everything = discover_models(Config(model_dirs=[str(mine), str(shared_dir / "models")]),
                                 include_auxiliary=True)
    names = {c.name for c in everything}
    assert {"Projector", "Phi3", "llama"} <= names


def test_nothing_found_in_an_empty_home(home):
    assert discover_models(Config()) == []
    assert discover_models(None) == []


def test_a_pipe_named_gguf_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    with pytest.raises(ModelFileError, match="not a regular file"):
        read_model_card(fifo)
