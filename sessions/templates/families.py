"""Which chat format a model speaks, read from the control tokens in its vocabulary.

Many GGUF files carry no chat template (base models, old conversions, hand-made quants).
Any fixed fallback is wrong for most of them: ChatML's ``<|im_start|>`` is plain text to a
Gemma or Llama tokenizer, so the model sees a prompt it was never trained on and echoes it.
The vocabulary, though, says which format the model was trained on: the turn markers of
its format are single control tokens in it. llama.cpp makes the same guess from a
template's *text* (``llm_chat_detect_template`` in ``src/llama-chat.cpp``); here it is made
from the tokens, since there is no text to look at.

The formats are ``FAMILIES``, most specific first (a vocabulary holding the markers of two
families, like Phi-4's ChatML plus ``<|im_sep|>``, matches the more specific one). Each
family's template is a Jinja file in ``builtin/``, named as llama.cpp names its
built-in template and rendering the same text (a test compares them), rendered in the same
sandbox as a template from a file. ``plain`` is the transcript used for base models.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class TemplateFamily:
    """One chat format: its built-in template and the control tokens that reveal it."""

    name: str
    """The built-in template's name (llama.cpp's name where it has one): ``gemma``, ..."""
    title: str
    """What people call it: "Gemma", "Llama 3"."""
    markers: tuple[str, ...]
    """Control tokens that must all be single tokens of the vocabulary."""


FAMILIES: tuple[TemplateFamily, ...] = (
    TemplateFamily("gpt-oss", "gpt-oss (Harmony)", ("<|start|>", "<|channel|>", "<|message|>", "<|end|>")),
    TemplateFamily("phi4", "Phi-4", ("<|im_start|>", "<|im_sep|>", "<|im_end|>")),
    TemplateFamily("deepseek3", "DeepSeek", ("<｜User｜>", "<｜Assistant｜>")),
    TemplateFamily("chatml", "ChatML", ("<|im_start|>", "<|im_end|>")),
    TemplateFamily("gemma4", "Gemma 4", ("<|turn>", "<turn|>")),
    TemplateFamily("gemma", "Gemma", ("<start_of_turn>", "<end_of_turn>")),
    TemplateFamily("llama4", "Llama 4", ("<|header_start|>", "<|header_end|>", "<|eot|>")),
    TemplateFamily("llama3", "Llama 3", ("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")),
    TemplateFamily("mistral-v7-tekken", "Mistral (v7)",
                   ("[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[INST]", "[/INST]")),
    TemplateFamily("mistral-v3", "Mistral (v3)", ("[INST]", "[/INST]")),
    TemplateFamily("phi3", "Phi-3", ("<|user|>", "<|assistant|>", "<|end|>")),
    TemplateFamily("granite", "Granite", ("<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>")),
    TemplateFamily("command-r", "Command R",
                   ("<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>")),
)

PLAIN = TemplateFamily("plain", "plain User:/Assistant: transcript", ())
"""For a vocabulary without chat markers: a base model, which continues text."""

BY_NAME: dict[str, TemplateFamily] = {family.name: family for family in (*FAMILIES, PLAIN)}

ALL_MARKERS: frozenset[str] = frozenset(marker for family in FAMILIES for marker in family.markers)
"""Every text ``detect_family`` looks for: what to ask the vocabulary about."""


def detect_family(special_tokens: Collection[str]) -> TemplateFamily | None:
    """The first family whose markers are all among ``special_tokens``; None for none.

    ``special_tokens`` are texts that are single control (or user-defined) tokens of the
    model's vocabulary; only the members of ``ALL_MARKERS`` matter.
    """
    present = set(special_tokens)
    for family in FAMILIES:
        if present.issuperset(family.markers):
            return family
    return None


@cache
def builtin_source(name: str) -> str:
    """The Jinja source of the built-in template ``name`` (a key of ``BY_NAME``)."""
    if name not in BY_NAME:
        raise KeyError(f"no built-in chat template named {name!r}")
    folder = resources.files("sessions.templates") / "builtin"
    return (folder / f"{name}.jinja").read_text(encoding="utf-8")
