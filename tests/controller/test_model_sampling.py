"""A model's recommended sampling settings: read from its file (``general.sampling.*``, the
keys llama.cpp reads) or its family's published ones, applied to new chats with it under
the config's own choices, and each value's source said."""

from __future__ import annotations

import pytest

from sessions.api.chat import SessionController
from sessions.sampling import SamplingSettings
from sessions.sampling_presets import (
    BUILT_IN,
    CONFIG,
    FAMILY_PRESETS,
    FILE_PRESET_NAME,
    THIS_CHAT,
    Preset,
    from_file,
    new_chat_sampling,
    recommended,
    sources,
)
from sessions.synth import make_model
from tests.gguf_support import rewrite_gguf
from tests.tui.fake_engine import FakeEngineFactory

SAMPLING_KEYS = {"general.sampling.temp": ("FLOAT32", 0.4), "general.sampling.top_k": ("INT32", 12),
                 "general.sampling.mirostat": ("INT32", 2)}


@pytest.fixture
def carrying(tmp_path):
    """A real model file whose header carries sampling settings."""
    return rewrite_gguf(make_model("llama", "tiny"), tmp_path / "carrying.gguf", SAMPLING_KEYS)


def test_the_files_keys_are_those_llama_cpp_reads():
    assert from_file({"general.sampling.temp": 0.4, "general.sampling.top_k": 12, "general.sampling.mirostat": 2,
                      "general.sampling.penalty_repeat": 1.1, "general.name": "x"}) == \
        {"temperature": 0.4, "top_k": 12, "repeat_penalty": 1.1}


def test_the_files_settings_win_over_the_familys_and_a_family_has_its_published_ones():
    assert recommended("gemma3", {"temperature": 0.4}) == Preset(FILE_PRESET_NAME, {"temperature": 0.4})
    gemma = recommended("gemma3", {})
    assert gemma is not None and gemma.values["temperature"] == 1.0 and gemma.values["top_k"] == 64
    assert gemma.values["top_p"] == 0.95
    qwen = FAMILY_PRESETS["qwen3"].values
    assert (qwen["temperature"], qwen["top_p"], qwen["top_k"], qwen["min_p"]) == (0.6, 0.95, 20, 0.0)
    assert recommended("llama", {}) is None


def test_the_configs_own_values_win_over_the_models():
    gemma = FAMILY_PRESETS["gemma3"]
    configured = SamplingSettings(temperature=0.3)  # top_k, top_p: the built-in defaults
    started = new_chat_sampling(configured, gemma)
    assert (started.temperature, started.top_k, started.top_p) == (0.3, 64, 0.95)
    said = sources(started.with_(seed=7), configured, gemma, {"precise": Preset("precise", {"seed": 7})})
    assert said["temperature"] == CONFIG and said["top_k"] == gemma.name and said["max_tokens"] == BUILT_IN
    assert said["seed"] == "preset precise"
    assert sources(started.with_(top_k=3), configured, gemma)["top_k"] == THIS_CHAT


def test_a_new_chat_with_the_model_starts_with_its_settings(store, carrying):
    ctl = SessionController(store, engine_factory=FakeEngineFactory(), sampling=SamplingSettings(min_p=0.2))
    ctl.new_session()  # before the load, as the app opens a chat, then loads: it follows the model
    ctl.load_model(carrying)
    assert ctl.model_preset == Preset(FILE_PRESET_NAME, {"temperature": 0.4, "top_k": 12})
    first = ctl.chat_settings().sampling
    assert (first.temperature, first.top_k, first.min_p) == (0.4, 12, 0.2)
    ctl.new_session()
    assert ctl.chat_settings().sampling == first
    ctl.set_sampling(first.with_(temperature=0.9))  # the user's own: a model loaded later leaves it
    ctl.load_model(make_model("gemma3", "tiny"))
    assert ctl.chat_settings().sampling.temperature == 0.9
    ctl.new_session()
    gemma = ctl.chat_settings().sampling
    assert (gemma.temperature, gemma.top_k, gemma.top_p) == (1.0, 64, 0.95)
    ctl.close()
