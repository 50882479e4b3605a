"""A client's whole conversation, rendered once and cut per message, on the 13 real templates.

The request's rendering is the truth for the request: the pieces must put it back
together exactly. Where a template renders history as it rendered the conversation as it
grew, the pieces must be the app's own frozen pieces (a served chat and an app chat hold
the same tokens for the same messages); where it rewrites history, a reply's piece is
what the template writes for it now.
"""

from __future__ import annotations

import pytest

from sessions.templates.chat_template import ChatMessage, ChatTemplate, TemplateError
from sessions.templates.request_pieces import request_pieces
from tests.templates.test_message_tokens import DAY_ONE, TEMPLATES, conversation, fake_tokenize, load

REWRITES_HISTORY = {
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",  # an empty think block before earlier replies
    "Qwen-Qwen3-0.6B",  # reasoning dropped from earlier replies, an empty block on the last
    "Qwen3.5-4B",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
    "openai-gpt-oss-120b",  # the final channel written before replies in history
}


@pytest.fixture(autouse=True)
def fixed_day(monkeypatch):
    from sessions.templates import chat_template

    monkeypatch.setattr(chat_template, "current_time", lambda: DAY_ONE)


def frozen(template: ChatTemplate, messages: list[ChatMessage], continue_last: bool) -> list[str]:
    from sessions.templates.message_tokens import message_text_piece

    last = len(messages) - 1
    return [message_text_piece(template, messages[:k], m, add_generation_prompt=(not continue_last) if k == last
                               else None) for k, m in enumerate(messages)]


@pytest.mark.parametrize("name", TEMPLATES)
def test_the_pieces_are_the_whole_rendering(name):
    template = load(name)
    messages = conversation(3)
    pieces = request_pieces(template, fake_tokenize, messages, continue_last=False)
    assert pieces.exact
    assert "".join(pieces.texts) == template.render(messages, add_generation_prompt=True)
    assert len(pieces.texts) == len(pieces.tokens) == len(messages)


@pytest.mark.parametrize("name", TEMPLATES)
def test_a_reply_to_go_on_from_ends_with_its_text(name):
    template = load(name)
    messages = [*conversation(2), ChatMessage("assistant", "It is four, and")]
    pieces = request_pieces(template, fake_tokenize, messages, continue_last=True)
    assert pieces.exact
    assert pieces.texts[-1].endswith("It is four, and")
    assert template.render(messages, add_generation_prompt=False).startswith("".join(pieces.texts))


@pytest.mark.parametrize("name", sorted(set(TEMPLATES) - REWRITES_HISTORY))
def test_history_rendered_as_it_grew_gives_the_apps_own_pieces(name):
    template = load(name)
    messages = conversation(3)
    assert request_pieces(template, fake_tokenize, messages, continue_last=False).texts == frozen(
        template, messages, False)
    going_on = [*messages, ChatMessage("assistant", "It is four")]
    assert request_pieces(template, fake_tokenize, going_on, continue_last=True).texts == frozen(
        template, going_on, True)


def test_a_reply_whose_reasoning_the_template_drops_is_its_answer_alone():
    template = load("Qwen-Qwen3-0.6B")
    messages = [ChatMessage("user", "Hi"), ChatMessage("assistant", "<think>\nhm\n</think>\n\nHello!"),
                ChatMessage("user", "And?")]
    pieces = request_pieces(template, fake_tokenize, messages, continue_last=False)
    assert pieces.exact
    assert pieces.texts[1] == "Hello!"
    assert pieces.texts[0].endswith("<|im_start|>assistant\n")  # the reply header ends the question's piece
    assert pieces.texts[2].startswith("<|im_end|>")  # the reply's closing opens the next piece


def test_a_trimmed_content_is_cut_where_the_template_puts_it():
    template = load("meta-llama-Llama-3.2-3B-Instruct")
    messages = [ChatMessage("user", "  Hi there  "), ChatMessage("assistant", " Hello! "), ChatMessage("user", "x")]
    pieces = request_pieces(template, fake_tokenize, messages, continue_last=False)
    assert pieces.exact
    assert pieces.texts[1] == "Hello!"
    assert pieces.texts[0].endswith("Hi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")


def test_each_piece_is_tokenized_alone_and_only_the_first_gets_a_bos():
    template = load("google-gemma-2-2b-it")  # writes its BOS itself
    messages = conversation(2)
    pieces = request_pieces(template, fake_tokenize, messages, continue_last=False)
    assert all(-1 not in tokens for tokens in pieces.tokens)
    chatml = load("Qwen-Qwen3-0.6B")  # writes none: the tokenizer adds it, to the first piece only
    tokens = request_pieces(chatml, fake_tokenize, messages, continue_last=False).tokens
    assert tokens[0][0] == -1 and all(-1 not in piece for piece in tokens[1:])
    assert [t for piece in tokens for t in piece][1:] == list(
        chatml.render(messages, add_generation_prompt=True).encode())


def test_a_template_that_cannot_be_cut_falls_back_to_the_apps_pieces():
    # Writes each message's length before it: a marker in its place changes what precedes it.
    source = ("{% for m in messages %}<{{ m.role }} {{ m.content|length }}>{{ m.content }}</{{ m.role }}>"
              "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")
    template = ChatTemplate.compile(source)
    messages = [ChatMessage("user", "Hello there"), ChatMessage("assistant", "Hi"), ChatMessage("user", "Bye")]
    pieces = request_pieces(template, fake_tokenize, messages, continue_last=False)
    assert pieces.exact  # the lengths come before the contents: each content's end is still found
    counted = ("{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }} {{ m.content|length }}>"
               "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}")
    after = ChatTemplate.compile(counted)
    pieces = request_pieces(after, fake_tokenize, messages, continue_last=False)
    assert not pieces.exact
    assert pieces.texts == frozen(after, messages, False)


def test_a_template_that_leaves_a_message_out_is_refused_in_words():
    template = ChatTemplate.compile("{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}"
                                    "{% endif %}{% endfor %}")
    with pytest.raises(TemplateError, match="leaves out"):
        request_pieces(template, fake_tokenize, [ChatMessage("user", "a"), ChatMessage("assistant", "b"),
                                                 ChatMessage("user", "c")], continue_last=False)
