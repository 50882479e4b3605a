"""Fetching a model by name through huggingface_hub, from a stand-in Hub on a loopback port.

The served files are tiny made models (``sessions.synth``), so what arrives is checked
as a model llama.cpp would open, not only as bytes.
"""

from __future__ import annotations

import pytest

from sessions.discovery import read_model_card
from sessions.hub import HubError, fetch_model, recent_downloads, search_models
from sessions.synth import make_model
from tests.gguf_support import split_copy

REPO = "org/tiny-GGUF"


@pytest.fixture
def tiny():
    return make_model("llama", "tiny")


@pytest.fixture
def served(fake_hub, tiny):
    """A repository with three quantisations of one tiny model (the bytes differ)."""
    model = tiny.read_bytes()
    fake_hub.add(REPO, {"README.md": b"# tiny", "tiny-Q8_0.gguf": make_model("gemma3", "tiny"),
                        "tiny-Q4_K_M.gguf": model, "mmproj-tiny-F16.gguf": b"not this one"}, downloads=7)
    return fake_hub


def test_a_name_alone_fetches_q4_k_m_into_the_hugging_face_cache(served, tiny, tmp_path):
    steps = []
    path = fetch_model(REPO, steps.append)
    assert path.read_bytes() == tiny.read_bytes()
    assert path.name == "tiny-Q4_K_M.gguf"
    assert path.is_relative_to(tmp_path / "hf-home" / "hub" / "models--org--tiny-GGUF")
    assert [r.path for r in served.requests if r.method == "GET" and "/resolve/" in r.path] == [
        "/org/tiny-GGUF/resolve/main/tiny-Q4_K_M.gguf"]
    assert steps[-1].finished and steps[-1].done == steps[-1].total == tiny.stat().st_size
    assert read_model_card(path).error is None
    assert [(entry.path, entry.name) for entry in recent_downloads()] == [(path, f"{REPO}:Q4_K_M")]


def test_a_tag_in_any_case_fetches_that_quantisation(served):
    path = fetch_model(f"{REPO}:q8_0")
    assert path.name == "tiny-Q8_0.gguf"
    assert read_model_card(path).architecture == "gemma3"
    assert served.gets("tiny-Q4_K_M.gguf") == []


def test_a_cached_model_is_checked_not_fetched_again(served):
    first = fetch_model(REPO)
    again = fetch_model(REPO)
    assert again == first
    assert len(served.gets("tiny-Q4_K_M.gguf")) == 1
    assert [r.method for r in served.requests if r.path.endswith("tiny-Q4_K_M.gguf")] == ["HEAD", "GET", "HEAD"]


def test_a_split_model_is_fetched_whole_and_opened_from_its_first_part(fake_hub, tiny, tmp_path):
    (tmp_path / "split").mkdir()
    parts = split_copy(tiny, tmp_path / "split" / "tiny-Q4_K_M.gguf", max_tensors=15)
    assert len(parts) >= 3
    fake_hub.add(REPO, {f"Q4/{part.name}": part for part in parts} | {"tiny-Q8_0.gguf": b"x"})
    steps = []
    path = fetch_model(REPO, steps.append)
    assert path.name == parts[0].name
    assert sorted(path.parent.iterdir()) == sorted(path.parent / part.name for part in parts)
    assert all((path.parent / part.name).read_bytes() == part.read_bytes() for part in parts)
    card = read_model_card(path)
    assert card.error is None and card.split_count == len(parts) and not card.missing_parts
    assert {(step.part, step.parts) for step in steps} == {(n, len(parts)) for n in range(1, len(parts) + 1)}


def test_a_dropped_connection_resumes_from_the_bytes_already_written(served, tiny):
    size = tiny.stat().st_size
    served.drop_after["tiny-Q4_K_M.gguf"] = size // 2
    path = fetch_model(REPO)
    assert path.read_bytes() == tiny.read_bytes()
    first, second = served.gets("tiny-Q4_K_M.gguf")
    assert first.header("Range") is None and first.body_bytes == size // 2
    assert second.header("Range") == f"bytes={size // 2}-"
    assert second.status == 206 and second.body_bytes == size - size // 2


def test_a_missing_repository_or_quantisation_is_one_sentence(served):
    with pytest.raises(HubError) as missing:
        fetch_model("org/no-such-model")
    assert str(missing.value).startswith(f"no model named org/no-such-model on {served.url} (check the name")
    assert "\n" not in str(missing.value)
    with pytest.raises(HubError, match=r"^org/tiny-GGUF: the repository has no Q2_K file; its quantisations: "
                                       r"Q4_K_M, Q8_0$"):
        fetch_model(f"{REPO}:Q2_K")
    assert recent_downloads() == []


def test_an_unreachable_hub_says_so(fake_hub, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: refused
    with pytest.raises(HubError, match=r"^could not reach http://127.0.0.1:9 and it is not in the cache"):
        fetch_model(REPO)


def test_a_cached_model_opens_when_the_hub_is_out_of_reach(served, monkeypatch):
    path = fetch_model(REPO)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    assert fetch_model(REPO) == path


def test_search_lists_gguf_repositories_the_most_downloaded_first(served):
    served.add("other/tiny-chat-GGUF", {"chat-Q4_K_M.gguf": b"x"}, downloads=99)
    served.add("other/tiny-safetensors", {"model.safetensors": b"x"}, downloads=500)
    assert [model.repo for model in search_models("TINY")] == ["other/tiny-chat-GGUF", REPO]
    (query,) = [r for r in served.requests if r.path == "/api/models"]
    assert query.method == "GET" and {"search=TINY", "filter=gguf", "sort=downloads"} <= set(query.query.split("&"))


def test_a_search_that_cannot_reach_the_hub_says_so_at_once(fake_hub, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(HubError, match=r"^could not reach http://127.0.0.1:9 to search it: check the network"):
        search_models("gemma")


def test_the_token_comes_from_hf_token_like_every_hub_tool(served, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_a_test_token")
    fetch_model(REPO)
    asked = [r for r in served.requests if r.path != "/api/models"]
    assert len(asked) == 3 and all(r.header("Authorization") == "Bearer hf_a_test_token" for r in asked)
