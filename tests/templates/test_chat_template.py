"""ChatTemplate: the real templates render, hostile ones are refused, ChatML stands in."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from sessions.templates import chat_template
from sessions.templates.chat_template import (
    ChatMessage,
    ChatTemplate,
    TemplateError,
    merge_system_messages,
)
from tests.conftest import SHARED

HOSTILE = Path(__file__).parents[1] / "data" / "templates"
REAL = sorted(p.stem for p in (SHARED / "templates").glob("*.jinja"))
CHATML_BODY = (
    "{% for m in messages %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CONVERSATION = [
    ChatMessage("system", "Be brief."),
    ChatMessage("user", "Name a colour."),
    ChatMessage("assistant", "Teal."),
    ChatMessage("user", "Another one?"),
]


def chatml(messages: list[ChatMessage]) -> str:
    turns = "".join(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


def real(name: str, **options) -> ChatTemplate:
    source = (SHARED / "templates" / f"{name}.jinja").read_text()
    return ChatTemplate.load(source, bos_token="<s>", eos_token="</s>", **options)


@pytest.mark.parametrize("system", [True, False], ids=["system", "no-system"])
@pytest.mark.parametrize("name", REAL)
def test_real_templates_render(name, system):
    template = real(name)
    assert not template.is_fallback and template.name == "model"
    assert template.merges_system is (name == "google-gemma-2-2b-it")
    messages = CONVERSATION if system else CONVERSATION[1:]
    text = template.render(messages, add_generation_prompt=True)
    for message in messages:
        assert message.content in text
    if system and template.merges_system:
        assert "Be brief.\nName a colour." in text  # llama.cpp's separator


def stock_environment(monkeypatch, tojson) -> ImmutableSandboxedEnvironment:
    """Jinja's own sandbox set up as ours is (no bounds), with its clock and ours stopped at
    one moment: what a real template must render the same in both."""
    now = datetime(2025, 3, 4, 12, 0)
    monkeypatch.setattr(chat_template, "current_time", lambda: now)
    stock = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                          extensions=["jinja2.ext.loopcontrols"])
    stock.globals["strftime_now"] = now.strftime
    stock.filters["tojson"] = tojson
    return stock


@pytest.mark.parametrize("name", REAL)
def test_bounds_do_not_change_what_real_templates_render(name, monkeypatch):
    stock = stock_environment(monkeypatch, lambda value, **options: json.dumps(value, **options))
    first = 1 if name == "google-gemma-2-2b-it" else 0  # it raises on a system message
    messages = (CONVERSATION[:1] + CONVERSATION[1:3] * 10)[first:] + CONVERSATION[3:]
    source = (SHARED / "templates" / f"{name}.jinja").read_text()
    expected = stock.from_string(source).render(
        messages=[{"role": m.role, "content": m.content} for m in messages],
        add_generation_prompt=True, bos_token="<s>", eos_token="</s>", tools=None, documents=None,
        enable_thinking=True)
    assert real(name).render(messages, add_generation_prompt=True) == expected


def test_system_role_rejection_is_retried_with_merged_text():
    gemma = real("google-gemma-2-2b-it")
    unmerged = dataclasses.replace(gemma, merges_system=False)
    assert unmerged.render(CONVERSATION, add_generation_prompt=True) == \
        gemma.render(CONVERSATION, add_generation_prompt=True)
    with pytest.raises(TemplateError, match="rejected the conversation: Conversation roles must"):
        gemma.render([ChatMessage("user", "a"), ChatMessage("user", "b")],
                     add_generation_prompt=True)


def test_merge_system_messages_keeps_turns_alternating():
    system, user, reply = ChatMessage("system", "S"), ChatMessage("user", "U"), \
        ChatMessage("assistant", "A")
    assert merge_system_messages([system, user, reply]) == [ChatMessage("user", "S\nU"), reply]
    assert merge_system_messages([system, reply]) == [ChatMessage("user", "S"), reply]
    assert merge_system_messages([user, reply, system]) == [user, reply, ChatMessage("user", "S")]


@pytest.mark.parametrize("source", [None, "", "  \n"])
def test_missing_template_uses_chatml(source):
    template = ChatTemplate.load(source)
    assert template.is_fallback and template.name == "chatml"
    assert template.fallback_reason == \
        "the model has no chat template; using the ChatML template instead"
    assert template.render(CONVERSATION, add_generation_prompt=True) == chatml(CONVERSATION)


def test_invalid_jinja_falls_back_with_the_line():
    template = ChatTemplate.load("{% for m in messages %}\n{{ m.content }\n{% endfor %}")
    assert template.is_fallback
    assert template.fallback_reason.startswith("the model's chat template is not valid Jinja (")
    assert "line 2" in template.fallback_reason


def test_template_that_drops_user_text_falls_back():
    template = ChatTemplate.load("{% for m in messages %}<turn>{% endfor %}")
    assert template.is_fallback
    assert "leaves out the text of system or user messages" in template.fallback_reason


HOSTILE_CASES = {
    "internals_subclasses": "forbidden attribute (access to attribute '__class__'",
    "internals_globals": "forbidden attribute (access to attribute '__init__'",
    "internals_context": "forbidden attribute (access to attribute '_TemplateReference__context'",
    "open_file": "uses something it was not given ('open' is undefined)",
    "import_module": "reading another template ('os') is forbidden",
    "nested_loops": "safety limit: the template ran far too long",
    "exponential_macro": "safety limit: the template ran far too long",
    "endless_recursion": "recursed too deeply",
    "huge_range": "safety limit: it asked for a range of 1,000,000,000 items",
    "huge_string": "safety limit: the '*' operator would build about 1,000,000,000 characters",
    "doubling_string": "safety limit: joining text would build about 33,554,432 characters",
    "wide_padding": "safety limit: the 'center' filter would build about 1,000,000,000",
    "huge_output": "safety limit: the template produced more than 16,777,216 characters",
}


def test_every_hostile_template_has_a_case():
    assert sorted(HOSTILE_CASES) == sorted(p.stem for p in HOSTILE.glob("*.jinja"))


@pytest.mark.parametrize("name", sorted(HOSTILE_CASES))
def test_hostile_template_is_refused(name, tmp_path):
    marker = tmp_path / "created-by-template"
    source = (HOSTILE / f"{name}.jinja").read_text().replace("@@MARKER@@", str(marker))
    tracer = sys.gettrace()
    started = time.monotonic()
    template = ChatTemplate.load(source)
    assert time.monotonic() - started < 10
    assert sys.gettrace() is tracer  # the step counter is removed after the render
    assert not marker.exists()
    assert template.is_fallback and template.name == "chatml"
    assert template.fallback_reason.startswith("the model's chat template ")
    assert HOSTILE_CASES[name] in template.fallback_reason
    assert template.fallback_reason.endswith("; using the ChatML template instead")
    assert template.render(CONVERSATION, add_generation_prompt=True) == chatml(CONVERSATION)


@pytest.mark.parametrize(("expression", "complaint"), [
    ("'x'.ljust(10 ** 9)", "calling 'ljust' would build"),
    ("'%*d' | format(10 ** 9, 1)", "the 'format' filter would build"),
    ("'{:>999999999}'.format(1)", "calling 'format' would build"),
    ("'{0}{0}{0}{0}'.format('y' * 8000000)", "calling 'format' would build"),
    ("range(100000) | join('z' * 1000000)", "the 'join' filter would build"),
    ("('w' * 100000) | replace('', 'w' * 100000)", "the 'replace' filter would build"),
    ("2 ** 1000000", "the '**' operator would build an integer of 2,000,000 bits"),
    ("[('v' * 1000000)] * 100", "the '*' operator would build"),
    ("range(100000) | map('replace', '', 'u' * 4000000) | list", "far more text than its input"),
    ("{'k': 'é<'} | tojson(indent=100000000)", "the 'tojson' filter would build"),
])
def test_expressions_that_build_too_much_are_refused(expression, complaint):
    started = time.monotonic()
    template = ChatTemplate.load("{{ " + expression + " }}" + CHATML_BODY)
    assert time.monotonic() - started < 10
    assert template.is_fallback and complaint in template.fallback_reason


def test_limits_still_apply_after_a_clean_load():
    # Behaves on the four-message test conversation, misbehaves on a fifth message.
    template = ChatTemplate.load(
        "{% if messages | length > 4 %}{{ 'x' * 10 ** 9 }}{% endif %}" + CHATML_BODY)
    assert not template.is_fallback
    with pytest.raises(TemplateError, match="^the model.s chat template went past a safety limit: "):
        template.render([*CONVERSATION, ChatMessage("assistant", "Red.")],
                        add_generation_prompt=False)


def test_template_helpers_behave_like_hugging_face(monkeypatch):
    monkeypatch.setattr(chat_template, "current_time", lambda: datetime(2025, 3, 4, 12, 0))
    template = ChatTemplate.load(
        "{{ strftime_now('%d %b %Y') }}|{{ {'name': 'é<&'} | tojson }}|"
        "{{ [1, 2] | tojson(indent=2) }}|{{ {'a': 1} | tojson(separators=(',', ':')) }}"
        + CHATML_BODY)
    text = template.render(CONVERSATION[1:2], add_generation_prompt=False)
    assert text.startswith('04 Mar 2025|{"name": "é<&"}|[\n  1,\n  2\n]|{"a":1}')


def test_template_variables_reach_the_template():
    qwen = real("Qwen-Qwen3-0.6B", variables={"enable_thinking": False})
    assert qwen.render(CONVERSATION, add_generation_prompt=True).endswith(
        "<|im_start|>assistant\n<think>\n\n</think>\n\n")
    gpt = real("openai-gpt-oss-120b", variables={"reasoning_effort": "high"})
    assert "Reasoning: high" in gpt.render(CONVERSATION, add_generation_prompt=True)
    # The conversation itself cannot be overridden by a variable.
    chat = ChatTemplate.load(CHATML_BODY, variables={"messages": [], "add_generation_prompt": 1})
    assert chat.render(CONVERSATION[1:2], add_generation_prompt=False) == \
        chatml(CONVERSATION[1:2]).removesuffix("<|im_start|>assistant\n")


def test_a_text_compiled_once_renders_with_each_templates_own_tokens_and_variables():
    """The compiled template is shared (``_compiled``): what differs between two loads of
    one text, the special tokens and the variables, is each load's own."""
    source = "{{ bos_token }}{% if flag %}F{% endif %}" + CHATML_BODY + "{{ eos_token }}"
    one = ChatTemplate.load(source, bos_token="<s>", eos_token="</s>", variables={"flag": True})
    two = ChatTemplate.load(source, bos_token="[B]", eos_token="[E]")
    assert one._compiled is two._compiled
    turn = CONVERSATION[1:2]
    assert one.render(turn, add_generation_prompt=False) == "<s>F" + chatml(turn).removesuffix(
        "<|im_start|>assistant\n") + "</s>"
    assert two.render(turn, add_generation_prompt=False) == "[B]" + chatml(turn).removesuffix(
        "<|im_start|>assistant\n") + "[E]"
