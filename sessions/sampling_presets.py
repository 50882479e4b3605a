"""Where a chat's sampling settings come from: the built-in defaults, the config file, the
model's recommended settings, a named preset.

Small models loop at the usual defaults, and a model's makers publish the settings it was
tuned for: llama.cpp reads them from a GGUF's ``general.sampling.*`` keys, LM Studio
applies them. A new chat with a model starts with them (``new_chat_sampling``), under
what the user chose: a ``[sampling]`` value that differs from the built-in default wins
over the model's (as a flag given to llama.cpp wins over the file's keys). A preset, the
model's or one of the user's ``[presets.NAME]`` tables, sets only the values it names.
``sources`` says, for the settings dialog, where each value of a chat came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from sessions.sampling import SamplingSettings

FILE_KEYS = {
    "general.sampling.temp": "temperature",
    "general.sampling.top_k": "top_k",
    "general.sampling.top_p": "top_p",
    "general.sampling.min_p": "min_p",
    "general.sampling.penalty_repeat": "repeat_penalty",
    "general.sampling.penalty_last_n": "repeat_last_n",
}
"""The GGUF keys llama.cpp reads a model's sampling from (``common_init_sampler_from_model``
in common/common.cpp, names in src/llama-arch.cpp of the pinned release), by the setting
each sets here. Its sampler sequence, XTC and Mirostat keys have no setting here."""


@dataclass(frozen=True)
class Preset:
    """Some sampling values with a name that says where they come from."""

    name: str
    """How the settings dialog names it ("Gemma 3's recommended", "precise")."""
    values: Mapping[str, float | int]
    """Setting name to value; the settings it does not name stay as they are."""

    def applied_to(self, settings: SamplingSettings) -> SamplingSettings:
        return settings.with_(**dict(self.values))


# Each family's settings as its makers publish them for chat, keyed by GGUF architecture.
FAMILY_PRESETS: dict[str, Preset] = {
    # Gemma 3 model card and its generation_config.json (Google): temperature 1.0, top_k 64, top_p 0.95.
    "gemma3": Preset("Gemma 3's recommended", {"temperature": 1.0, "top_k": 64, "top_p": 0.95, "min_p": 0.0}),
    "gemma3n": Preset("Gemma 3n's recommended", {"temperature": 1.0, "top_k": 64, "top_p": 0.95, "min_p": 0.0}),
    # Qwen3 model card (Qwen), "best practices", thinking mode (its template's default):
    # temperature 0.6, top_p 0.95, top_k 20, min_p 0. Without thinking it gives 0.7 and 0.8.
    "qwen3": Preset("Qwen3's recommended", {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.0}),
    "qwen3moe": Preset("Qwen3's recommended", {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.0}),
    # gpt-oss model card (OpenAI): temperature 1.0, top_p 1.0, no top-k.
    "gpt-oss": Preset("gpt-oss's recommended", {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0}),
    # LFM2 model card (Liquid AI): temperature 0.3, min_p 0.15, repetition penalty 1.05.
    "lfm2": Preset("LFM2's recommended", {"temperature": 0.3, "min_p": 0.15, "repeat_penalty": 1.05}),
}
FILE_PRESET_NAME = "the model file's"
"""How the settings a GGUF carries (``general.sampling.*``) are named."""
BUILT_IN, CONFIG, THIS_CHAT = "built-in default", "config [sampling]", "this chat"


def from_file(metadata: Mapping[str, Any]) -> dict[str, float | int]:
    """The sampling values a GGUF's metadata recommends, by setting name (numbers only)."""
    kinds = {f.name: type(getattr(SamplingSettings(), f.name)) for f in fields(SamplingSettings)}
    found: dict[str, float | int] = {}
    for key, name in FILE_KEYS.items():
        value = metadata.get(key)
        if isinstance(value, float):  # a float32 in the file: 0.4 reads 0.4000000059604645
            value = float(f"{value:.7g}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            found[name] = kinds[name](value)
    return found


def recommended(architecture: str | None, file_values: Mapping[str, float | int]) -> Preset | None:
    """The model's recommended settings: those its file carries, else its family's (None:
    neither says any). A file's own keys are its maker's choice for that file."""
    if file_values:
        return Preset(FILE_PRESET_NAME, dict(file_values))
    return FAMILY_PRESETS.get(architecture or "")


def within_bounds(preset: Preset | None) -> Preset | None:
    """``preset`` when every value it names can go to llama.cpp (a file may hold anything)."""
    if preset is None or preset.applied_to(SamplingSettings()).out_of_range() is not None:
        return None
    return preset


def new_chat_sampling(defaults: SamplingSettings, model: Preset | None) -> SamplingSettings:
    """A new chat's settings: ``defaults`` (the config's), with the model's recommended
    values where the config left the built-in default."""
    if model is None:
        return defaults
    built_in = SamplingSettings()
    given = {name: value for name, value in model.values.items() if getattr(defaults, name) == getattr(built_in, name)}
    return defaults.with_(**given)


def sources(settings: SamplingSettings, defaults: SamplingSettings, model: Preset | None,
            presets: Mapping[str, Preset] | None = None) -> dict[str, str]:
    """Where each of ``settings``' values plausibly came from, by setting name: the model's
    recommendation, the config, the built-in default, a named preset, else this chat."""
    built_in = SamplingSettings()
    start = new_chat_sampling(defaults, model)
    said: dict[str, str] = {}
    for f in fields(SamplingSettings):
        name, value = f.name, getattr(settings, f.name)
        if model is not None and name in model.values and value == getattr(start, name) == model.values[name]:
            said[name] = model.name
        elif value == getattr(defaults, name) != getattr(built_in, name):
            said[name] = CONFIG
        elif value == getattr(built_in, name) == getattr(defaults, name):
            said[name] = BUILT_IN
        else:
            said[name] = next((f"preset {preset.name}" for preset in (presets or {}).values()
                               if preset.values.get(name) == value), THIS_CHAT)
    return said
