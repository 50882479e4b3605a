"""Reasoning and answer told apart in replies as the real templates and models write them."""

from __future__ import annotations

import json
import random
from datetime import datetime

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from sessions.reasoning import ReasoningSplitter, ReplyView, prompt_opens_reasoning, split_reply
from sessions.templates.chat_template import ChatMessage, ChatTemplate
from sessions.templates.message_tokens import generation_suffix
from tests.conftest import SHARED

THOUGHT = "The user asks for 2 + 2.\nThat is 4, a small sum."
ANSWER = "2 + 2 is 4."
QUESTION = [{"role": "user", "content": "What is 2 + 2?"}]


def render(name: str, messages: list[dict], add_generation_prompt: bool, **variables) -> str:
    """A real template rendered as Hugging Face renders it, extra message fields included."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["strftime_now"] = lambda fmt: datetime(2025, 3, 4).strftime(fmt)
    env.globals["raise_exception"] = lambda message: (_ for _ in ()).throw(ValueError(message))
    env.filters["tojson"] = lambda value, **options: json.dumps(value, **options)
    template = env.from_string((SHARED / "templates" / f"{name}.jinja").read_text())
    return template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                           bos_token="", eos_token="", **variables)


def generated(name: str, reply: dict, end: str, **variables) -> str:
    """What the model wrote after the generation prompt, as the template records it."""
    prompt = render(name, QUESTION, True, **variables)
    full = render(name, [*QUESTION, {"role": "assistant", **reply}], False, **variables)
    assert full.startswith(prompt)
    return full[len(prompt):].removesuffix(end)


def qwen3_reply() -> str:
    text = generated("Qwen-Qwen3-0.6B", {"content": ANSWER, "reasoning_content": THOUGHT}, "<|im_end|>\n")
    assert text == f"<think>\n{THOUGHT}\n</think>\n\n{ANSWER}"
    return text


def gpt_oss_reply(with_control_tokens: bool) -> str:
    text = generated("openai-gpt-oss-120b", {"content": ANSWER, "thinking": THOUGHT}, "<|return|>")
    assert text == (f"<|channel|>analysis<|message|>{THOUGHT}<|end|>"
                    f"<|start|>assistant<|channel|>final<|message|>{ANSWER}")
    # llama.cpp leaves <|end|> out of the text (a control token); <|channel|>, <|message|>
    # and <|start|> it always writes.
    return text if with_control_tokens else text.replace("<|end|>", "")


def r1_prompt() -> str:
    template = ChatTemplate.load((SHARED / "templates" / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja").read_text(),
                                 variables={"enable_thinking": True})
    return generation_suffix(template, [ChatMessage("user", "What is 2 + 2?")])


def check(view: ReplyView, text: str) -> None:
    """Every part is an unbroken slice of the stored text, at the offset it names."""
    for part in view.parts:
        assert text[part.start:part.start + len(part.text)] == part.text


def stream(text: str, sizes, **options) -> list[ReplyView]:
    splitter = ReasoningSplitter(**options)
    views, at = [], 0
    for size in sizes:
        views.append(splitter.push(text[at:at + size]))
        at += size
    assert at >= len(text)
    views.append(splitter.finish())
    return views


def test_qwen3_think_block():
    text = qwen3_reply()
    view = split_reply(text)
    assert view.reasoning == THOUGHT and view.answer == ANSWER and not view.thinking
    assert [p.kind for p in view.parts] == ["reasoning", "answer"] and view.parts[0].closed
    check(view, text)


@pytest.mark.parametrize("with_control_tokens", [True, False], ids=["with-end", "as-llama.cpp-prints"])
def test_gpt_oss_channels(with_control_tokens):
    text = gpt_oss_reply(with_control_tokens)
    view = split_reply(text)
    assert view.reasoning == THOUGHT and view.answer == ANSWER
    assert [(p.kind, p.channel) for p in view.parts] == [("reasoning", "analysis"), ("answer", "final")]
    check(view, text)


def test_deepseek_r1_opens_the_block_in_the_prompt():
    prompt = r1_prompt()
    assert prompt.endswith("<｜Assistant｜><think>\n") and prompt_opens_reasoning(prompt)
    reply = f"{THOUGHT}\n</think>\n\n{ANSWER}"
    told = split_reply(reply, starts_in_reasoning=True)
    assert told.reasoning == THOUGHT and told.answer == ANSWER
    # Not told: the first </think> without a <think> still marks what came before it.
    assert split_reply(reply) == told
    check(told, reply)


@pytest.mark.parametrize(("name", "variables", "opens"), [
    ("Qwen-Qwen3-0.6B", {}, False),  # the model writes <think> itself
    ("Qwen-Qwen3-0.6B", {"enable_thinking": False}, False),  # an empty block, closed
    ("Qwen3.5-4B", {}, True),
    ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", {}, True),
    ("NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", {"enable_thinking": False}, False),
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", {"enable_thinking": True}, True),
    ("google-gemma-4-31B-it", {}, False),
    ("openai-gpt-oss-120b", {}, False),
    ("meta-llama-Llama-3.2-3B-Instruct", {}, False),
])
def test_which_generation_prompts_open_a_block(name, variables, opens):
    template = ChatTemplate.load((SHARED / "templates" / f"{name}.jinja").read_text(), variables=variables)
    assert prompt_opens_reasoning(generation_suffix(template, [ChatMessage("user", "Hi")])) is opens


def test_gemma4_thought_channel():
    assert render("google-gemma-4-31B-it", QUESTION, True).endswith("<|turn>model\n<|channel>thought\n<channel|>")
    reply = f"<|channel>thought\n{THOUGHT}<channel|>{ANSWER}"
    view = split_reply(reply)
    assert view.reasoning == THOUGHT and view.answer == ANSWER
    check(view, reply)
    # Had the prompt opened the channel, the reply would start inside it.
    assert prompt_opens_reasoning("<|turn>model\n<|channel>thought\n")
    opened = split_reply(f"{THOUGHT}<channel|>{ANSWER}", starts_in_reasoning=True)
    assert opened.reasoning == THOUGHT and opened.answer == ANSWER


@pytest.mark.parametrize("case", ["qwen3", "gpt-oss", "gpt-oss-printed", "r1"])
@pytest.mark.parametrize("chunking", ["chars", "random"])
def test_streaming_never_shows_a_marker_and_ends_where_the_whole_text_does(case, chunking):
    options = {"starts_in_reasoning": True} if case == "r1" else {}
    text = {"qwen3": qwen3_reply, "gpt-oss": lambda: gpt_oss_reply(True),
            "gpt-oss-printed": lambda: gpt_oss_reply(False),
            "r1": lambda: f"{THOUGHT}\n</think>\n\n{ANSWER}"}[case]()
    rng = random.Random(7)
    sizes = [1] * len(text) if chunking == "chars" else [rng.randint(1, 9) for _ in text]
    views = stream(text, sizes, **options)
    assert views[-1] == split_reply(text, **options)
    seen_thinking = False
    for before, after in zip(views, views[1:], strict=False):
        for part in after.parts:
            assert "<" not in part.text and "|" not in part.text  # no marker, not even half of one
        # Text only grows: each part of an earlier view is the start of the same part later.
        for old, new in zip(before.parts, after.parts, strict=False):
            assert (old.kind, old.start) == (new.kind, new.start) and new.text.startswith(old.text)
        seen_thinking |= after.thinking
        check(after, text)
    assert seen_thinking and not views[-1].thinking


def test_an_unclosed_block_is_still_thinking():
    splitter = ReasoningSplitter()
    assert splitter.push("<think>\nLet me see").thinking
    view = splitter.push(", the sum is")
    assert view.thinking and view.reasoning == "Let me see, the sum is" and view.answer == ""
    assert splitter.push(" 4.</thi").thinking  # half a closing marker closes nothing yet
    done = splitter.push("nk>\n\n4")
    assert not done.thinking and done.answer == "4"


def test_a_reply_cut_inside_its_block_stays_open():
    view = split_reply("<think>\nStill going when the limit came")
    assert view.thinking and view.answer == "" and view.reasoning == "Still going when the limit came"


def test_held_back_text_that_was_no_marker_is_shown_at_the_end():
    splitter = ReasoningSplitter()
    assert splitter.push("a < b and b <|").answer == "a < b and b"
    assert splitter.finish().answer == "a < b and b <|"


def test_markers_inside_an_answer_are_text():
    text = "Write <think> and </think> around your notes; <|channel|> is gpt-oss."
    view = split_reply(text)
    assert [p.kind for p in view.parts] == ["answer"] and view.answer == text
    after_block = split_reply(f"<think>x</think>Use </think> to close. {text}")
    assert after_block.reasoning == "x" and after_block.answer == f"Use </think> to close. {text}"


def test_plain_replies_are_all_answer():
    assert split_reply("") == ReplyView(())
    view = split_reply("Just an answer.\n")
    assert view.answer == "Just an answer." and view.reasoning == "" and not view.thinking
    qwen_no_think = split_reply("<think>\n\n</think>\n\nHi!")
    assert qwen_no_think.reasoning == "" and qwen_no_think.answer == "Hi!"
