"""Which real templates start a reply inside reasoning, and the mark it leaves on the reply.

The controller asks the template once per reply (``reply_opens_in_reasoning``) and keeps
the answer with the reply (``GenerationStats.opened_in_reasoning``), so a view can tell
the reasoning of R1, Qwen3.5 or Nemotron from their answer although their text opens no
block of its own. It travels through an export and an import like the other stats.
"""

from __future__ import annotations

import pytest

from sessions.engine.chat_template import ChatMessage, ChatTemplate, TemplateError
from sessions.engine.message_tokens import reply_opens_in_reasoning
from sessions.exchange import ExchangeError, export_json, import_data
from sessions.tree import GenerationStats
from tests.conftest import SHARED

TEMPLATES = SHARED / "templates"
OPENS = {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "Qwen3.5-4B", "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"}
HISTORY = [ChatMessage("system", "Be brief."), ChatMessage("user", "Hello there.")]


@pytest.mark.parametrize("path", sorted(TEMPLATES.glob("*.jinja")), ids=lambda p: p.stem)
def test_the_templates_whose_prompt_opens_the_reasoning(path):
    template = ChatTemplate.load(path.read_text())
    assert reply_opens_in_reasoning(template, HISTORY) == (path.stem in OPENS)


def test_with_thinking_turned_off_the_prompt_opens_nothing():
    source = (TEMPLATES / "Qwen3.5-4B.jinja").read_text()
    assert not reply_opens_in_reasoning(ChatTemplate.load(source, variables={"enable_thinking": False}), HISTORY)


PICKY = ("{% for m in messages %}{% if 'refuse me' in m.content %}{{ raise_exception('roles must alternate') }}"
         "{% endif %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}"
         "{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}")


def test_a_template_that_cannot_render_the_chat_opens_nothing():
    picky = ChatTemplate.load(PICKY)
    assert reply_opens_in_reasoning(picky, HISTORY)  # it renders this chat, and opens the block
    refused = [ChatMessage("system", "Please refuse me."), HISTORY[-1]]
    with pytest.raises(TemplateError, match="roles must alternate"):
        picky.render(refused, add_generation_prompt=True)
    assert not reply_opens_in_reasoning(picky, refused)  # for display only: no error


def test_the_mark_survives_an_export_and_an_import(store):
    session = store.create_session(title="thinking")
    question = store.add_message(session.id, None, "user", "Hello there.")
    store.add_message(session.id, question.id, "assistant", "A greeting.</think>Hello!",
                      stats=GenerationStats(tokens_generated=6, opened_in_reasoning=True))
    data = export_json(store, session.id)
    (copy,) = import_data(store, data)
    reply = next(m for m in store.messages(copy) if m.role == "assistant")
    assert reply.stats is not None and reply.stats.opened_in_reasoning
    data["messages"][1]["stats"]["opened_in_reasoning"] = "yes"
    with pytest.raises(ExchangeError, match="'stats.opened_in_reasoning' should be true or false, found a string"):
        import_data(store, data)
