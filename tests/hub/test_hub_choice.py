"""Which files ``-hf user/repo[:quant]`` fetches: llama.cpp's choice, file names only."""

from __future__ import annotations

import pytest

from sessions.hub import HubError, HubSpec, best_model, model_files, parse_spec, quant_tags

FILES = [
    "README.md",
    "mmproj-model-Q4_K_M.gguf",
    "model-F16.gguf",
    "model-Q8_0.gguf",
    "model-Q4_K_M.gguf",
    "model-q5_k_m.gguf",
    "big/model-Q6_K-00002-of-00003.gguf",
    "big/model-Q6_K-00001-of-00003.gguf",
    "big/model-Q6_K-00003-of-00003.gguf",
]


def test_a_name_is_user_slash_repo_with_an_optional_tag():
    assert parse_spec("ggml-org/gemma-3-270m-it-GGUF") == HubSpec("ggml-org/gemma-3-270m-it-GGUF")
    assert parse_spec(" unsloth/Qwen3-0.6B-GGUF:q8_0 ") == HubSpec("unsloth/Qwen3-0.6B-GGUF", "q8_0")
    assert str(parse_spec("a/b:Q4_K_M")) == "a/b:Q4_K_M"
    for bad in ("gemma", "a/b/c", "/b", "a/", "../x", "a/b:Q4 K"):
        with pytest.raises(HubError, match="not a"):
            parse_spec(bad)


def test_without_a_tag_q4_k_m_comes_first_and_sidecars_never_count():
    assert best_model(FILES) == "model-Q4_K_M.gguf"  # not the projector listed before it
    assert best_model([f for f in FILES if "Q4_K_M" not in f]) == "model-Q8_0.gguf"
    assert best_model(["mmproj-F16.gguf", "x-imatrix.gguf", "tiny-F32.gguf", "other-F16.gguf"]) == "tiny-F32.gguf"
    assert best_model(["README.md", "mmproj-F16.gguf"]) is None


def test_a_tag_matches_in_any_case_and_only_that_tag():
    assert best_model(FILES, "Q5_K_M") == "model-q5_k_m.gguf"
    assert best_model(FILES, "f16") == "model-F16.gguf"
    assert best_model(FILES, "Q2_K") is None
    with pytest.raises(HubError, match="no Q2_K file; its quantisations: F16, Q4_K_M, Q5_K_M, Q6_K, Q8_0"):
        model_files(FILES, "Q2_K")
    with pytest.raises(HubError, match="no GGUF model file"):
        model_files(["README.md", "model.safetensors"])


def test_a_split_model_is_fetched_whole_and_opened_from_its_first_part():
    assert model_files(FILES, "q6_k") == [
        "big/model-Q6_K-00001-of-00003.gguf", "big/model-Q6_K-00002-of-00003.gguf",
        "big/model-Q6_K-00003-of-00003.gguf"]
    with pytest.raises(HubError, match="part 1 of 3, but the repository holds 2"):
        model_files([f for f in FILES if "00003-of" not in f], "Q6_K")


def test_the_quantisations_offered_are_the_model_files_tags():
    assert quant_tags(FILES) == ["F16", "Q8_0", "Q4_K_M", "Q5_K_M", "Q6_K"]
