"""Chats whose replies carry reasoning go on past their second reply, on the real templates.

A reply is stored exactly as the model wrote it, reasoning included, since its tokens are
what the model's cache holds. Later messages' pieces are rendered with those replies in the
template's look-back, so a template that refuses reasoning markup in a reply's ``content``
(gpt-oss's Harmony template does) must still be able to render them.
"""

from __future__ import annotations

import pytest

from sessions.templates.chat_template import ChatMessage, ChatTemplate
from sessions.templates.message_tokens import freeze_message_tokens, message_text_piece
from tests.conftest import SHARED

TEMPLATES = sorted(p.stem for p in (SHARED / "templates").glob("*.jinja"))

# What each reasoning model writes after its generation prompt (llama.cpp prints gpt-oss's
# <|channel|>, <|message|> and <|start|> but leaves the control token <|end|> out).
REPLIES = {
    "openai-gpt-oss-120b": ("<|channel|>analysis<|message|>Adding {n} and {n}."
                            "<|start|>assistant<|channel|>final<|message|>It is {s}."),
    "Qwen-Qwen3-0.6B": "<think>\nAdding {n} and {n}.\n</think>\n\nIt is {s}.",
    "HuggingFaceTB-SmolLM3-3B": "<think>\nAdding {n} and {n}.\n</think>\nIt is {s}.",
    "Qwen3.5-4B": "Adding {n} and {n}.\n</think>\n\nIt is {s}.",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": "Adding {n} and {n}.\n</think>\nIt is {s}.",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": "Adding {n} and {n}.\n</think>\n\nIt is {s}.",
    "google-gemma-4-31B-it": "<|channel>thought\nAdding {n} and {n}.<channel|>It is {s}.",
}


def load(name: str) -> ChatTemplate:
    template = ChatTemplate.load((SHARED / "templates" / f"{name}.jinja").read_text(),
                                 bos_token="<s>", eos_token="</s>")
    assert not template.is_fallback, template.fallback_reason
    return template


def reply(name: str, turn: int) -> ChatMessage:
    text = REPLIES.get(name, "It is {s}.").format(n=turn, s=turn + turn)
    return ChatMessage("assistant", text)


@pytest.mark.parametrize("system", [True, False], ids=["system", "no-system"])
@pytest.mark.parametrize("name", TEMPLATES)
def test_a_chat_of_generated_replies_goes_on(name, system):
    template = load(name)
    history = [ChatMessage("system", "Be brief.")] if system else []
    for turn in range(4):
        question = ChatMessage("user", f"What is {turn} plus {turn}?")
        piece = message_text_piece(template, history, question)
        assert question.content in piece
        history += [question, reply(name, turn)]


def test_an_imported_gpt_oss_reply_gets_the_tokens_it_was_generated_as():
    """A gpt-oss reply frozen again (for another model file, or an imported chat) is the
    analysis, the <|end|> llama.cpp left out of its text, and the final answer."""
    template = load("openai-gpt-oss-120b")
    history = [ChatMessage("user", "What is 1 plus 1?")]
    piece = message_text_piece(template, history, reply("openai-gpt-oss-120b", 1))
    assert piece == ("<|channel|>analysis<|message|>Adding 1 and 1.<|end|>"
                     "<|start|>assistant<|channel|>final<|message|>It is 2.")
    history.append(reply("openai-gpt-oss-120b", 1))
    tokens = freeze_message_tokens(template, lambda text, bos: list(text.encode()), history,
                                   ChatMessage("user", "And 2 plus 2?"))
    assert bytes(tokens).decode() == ("<|end|><|start|>user<|message|>And 2 plus 2?<|end|>"
                                      "<|start|>assistant")


@pytest.mark.parametrize(("name", "opening"), [
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "<｜Assistant｜><think>\n"),
    ("google-gemma-4-31B-it", "<|turn>model\n"),
])
def test_reasoning_models_may_reason_unless_told_not_to(name, opening):
    """llama.cpp renders every template with ``enable_thinking`` true unless asked not to;
    left undefined, DeepSeek-R1's template closes the think block in the prompt and Gemma 4's
    writes an empty thought channel, so those models would never reason here."""
    question = [ChatMessage("user", "What is 1 plus 1?")]
    assert load(name).render(question, add_generation_prompt=True).endswith(opening)
    quiet = ChatTemplate.load((SHARED / "templates" / f"{name}.jinja").read_text(),
                              variables={"enable_thinking": False})
    assert not quiet.render(question, add_generation_prompt=True).endswith(opening)
