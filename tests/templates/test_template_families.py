"""The built-in templates: detected from markers, equal to llama.cpp's, and freezable."""

from __future__ import annotations

import ctypes

import pytest

from sessions.templates.chat_template import ChatMessage, ChatTemplate
from sessions.templates.families import ALL_MARKERS, BY_NAME, FAMILIES, PLAIN, builtin_source, detect_family
from sessions.templates.message_tokens import message_text_piece
from tests.conftest import SHARED

CONVERSATIONS = {
    "system": [ChatMessage("system", "Be brief."), ChatMessage("user", "Name a colour."),
               ChatMessage("assistant", "Teal."), ChatMessage("user", "Another one?")],
    "no-system": [ChatMessage("user", "Name a colour."), ChatMessage("assistant", "Teal."),
                  ChatMessage("user", "Another one?")],
    "padded": [ChatMessage("user", "  padded  \n"), ChatMessage("assistant", " Sure. "),
               ChatMessage("user", "x")],
    "two-systems": [ChatMessage("system", "One."), ChatMessage("system", "Two."),
                    ChatMessage("user", "Hi"), ChatMessage("assistant", "Hello"), ChatMessage("user", "Bye")],
}
NOT_IN_LLAMA_CPP = {
    "gemma4": "llama.cpp 0.3.36 has no Gemma 4 built-in",
    "gpt-oss": "ours writes an earlier reply as Harmony history does (final channel, <|end|>)",
    "plain": "the base-model transcript is ours",
}
# The real template of a model of each family, and what it writes that the built-in does
# not: an opening of the reasoning block after the generation prompt (and, for Nemotron,
# an empty block before an earlier reply).
REAL = {
    "google-gemma-2-2b-it": ("gemma", ""),
    "google-gemma-4-31B-it": ("gemma4", ""),
    "meta-llama-Llama-3.2-3B-Instruct": ("llama3", ""),
    "microsoft-Phi-3.5-mini-instruct": ("phi3", ""),
    "Qwen-Qwen3-0.6B": ("chatml", ""),
    "Qwen3.5-4B": ("chatml", "<think>\n"),
    "LFM2.5-Instruct": ("chatml", ""),
    "HuggingFaceTB-SmolLM3-3B": ("chatml", ""),
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": ("chatml", "<think>\n"),
    "ibm-granite-granite-4.0": ("granite", ""),
    "Mistral-Small-3.2-24B-Instruct-2506": ("mistral-v7-tekken", ""),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ("deepseek3", "<think>\n"),
    "openai-gpt-oss-120b": ("gpt-oss", ""),
}


def native_render(name: str, messages: list[ChatMessage], add_generation_prompt: bool) -> str | None:
    """llama.cpp's own rendering with its built-in template ``name`` (None: it has none)."""
    import llama_cpp as L

    chat = (L.llama_chat_message * len(messages))(
        *[L.llama_chat_message(m.role.encode(), m.content.encode()) for m in messages])
    size = L.llama_chat_apply_template(name.encode(), chat, len(messages), add_generation_prompt, None, 0)
    if size < 0:
        return None
    buffer = ctypes.create_string_buffer(size + 1)
    L.llama_chat_apply_template(name.encode(), chat, len(messages), add_generation_prompt, buffer, size + 1)
    return buffer.raw[:size].decode()


def test_every_family_is_found_by_its_own_markers():
    for family in FAMILIES:
        assert detect_family(family.markers) == family, family.name
    assert detect_family(()) is None
    assert detect_family({"<|endoftext|>", "<s>", "</s>", "<think>", "</think>"}) is None


@pytest.mark.parametrize(("markers", "expected"), [
    ({"<|im_start|>", "<|im_end|>", "<|im_sep|>"}, "phi4"),  # Phi-4 is ChatML plus a separator
    ({"<|im_start|>", "<|im_end|>", "<｜User｜>", "<｜Assistant｜>"}, "deepseek3"),  # R1 distills of Qwen
    ({"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>"}, "gpt-oss"),  # not Phi-3
    ({"[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"}, "mistral-v7-tekken"),
    ({"[INST]", "[/INST]"}, "mistral-v3"),
    ({"<|user|>", "<|assistant|>", "<|end|>", "<|system|>", "<|endoftext|>"}, "phi3"),
    ({"<start_of_turn>"}, None),  # half a pair is no evidence
])
def test_the_most_specific_family_wins(markers, expected):
    found = detect_family(markers)
    assert (found.name if found else None) == expected


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_templates_use_the_markers_of_their_family(name):
    text = (SHARED / "templates" / f"{name}.jinja").read_text()
    found = detect_family({marker for marker in ALL_MARKERS if marker in text})
    assert found is not None and found.name == REAL[name][0]


@pytest.mark.parametrize("name", sorted(REAL))
def test_the_built_in_speaks_the_real_template_turns(name):
    """Without a system prompt, the real template's render ends with the built-in's (the real
    one may add a default system prompt before, and a reasoning opening after)."""
    family, opening = REAL[name]
    messages = CONVERSATIONS["no-system"]
    real = ChatTemplate.compile((SHARED / "templates" / f"{name}.jinja").read_text(), eos_token="</s>")
    ours = ChatTemplate.builtin(family).render(messages, add_generation_prompt=True)
    rendered = real.render(messages, add_generation_prompt=True).removesuffix(opening)
    if name.startswith("NVIDIA-Nemotron"):
        rendered = rendered.replace("<think></think>Teal.", "Teal.")
    assert rendered.endswith(ours)


@pytest.mark.parametrize("conversation", sorted(CONVERSATIONS))
@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_built_ins_render_what_llama_cpp_renders(name, conversation):
    messages = CONVERSATIONS[conversation]
    template = ChatTemplate.builtin(name)
    assert not template.is_fallback and template.name == name
    for add in (True, False):
        ours = template.render(messages, add_generation_prompt=add)
        assert all(message.content.strip() in ours for message in messages)
        theirs = native_render(name, messages, add)
        if name in NOT_IN_LLAMA_CPP:
            continue
        assert theirs is not None, f"llama.cpp has no built-in {name!r}"
        assert ours == theirs


def test_every_built_in_has_a_family_and_a_file():
    assert set(BY_NAME) == {f.name for f in FAMILIES} | {PLAIN.name}
    for name in BY_NAME:
        assert "messages" in builtin_source(name)
    with pytest.raises(KeyError):
        builtin_source("../../etc/passwd")


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_built_in_pieces_are_append_only(name):
    """Each message's piece, computed once as the chat grows, rebuilds the full render, and a
    message added later never changes an earlier piece: what ``message_tokens`` relies on."""
    template = ChatTemplate.builtin(name)
    messages = [ChatMessage("system", "You answer briefly.")]
    for turn in range(4):
        messages += [ChatMessage("user", f"Question {turn}?"), ChatMessage("assistant", f"Answer {turn}.")]
    messages.append(ChatMessage("user", "Last one?"))
    pieces = [message_text_piece(template, messages[:k], m) for k, m in enumerate(messages)]
    assert "".join(pieces) == template.render(messages, add_generation_prompt=True)
    for end in range(1, len(messages)):
        again = [message_text_piece(template, messages[:k], m) for k, m in enumerate(messages[:end])]
        assert again == pieces[:end]
