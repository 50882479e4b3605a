"""Which real templates start a reply inside reasoning, and the mark it leaves on the reply.

The controller asks the template once per reply (``reply_opens_in_reasoning``), checks the
answer against the tokens the reply really follows, and keeps it with the reply
(``GenerationStats.opened_in_reasoning``), so a view can tell the reasoning of R1, Qwen3.5
or Nemotron from their answer although their text opens no block of its own. It travels
through an export and an import like the other stats.
"""

from __future__ import annotations

import pytest

from sessions.exchange import ExchangeError, export_json, import_data
from sessions.templates.chat_template import ChatMessage, ChatTemplate, TemplateError
from sessions.templates.message_tokens import reply_opens_in_reasoning
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


def test_a_reply_follows_the_prompt_its_question_was_frozen_with(tmp_path, store):
    """A question keeps the tokens it was first given, generation prompt included: a reply
    regenerated after the template variables changed follows the old prompt (here a closed
    block), so its answer must not be taken for reasoning. A new question gets the new one."""
    from sessions.api.chat import SessionController
    from tests.tui.fake_engine import FakeEngineFactory, FakeScript

    source = (TEMPLATES / "Qwen3.5-4B.jinja").read_text()
    script = FakeScript(template=ChatTemplate.load(source, variables={"enable_thinking": False}))
    controller = SessionController(store, engine_factory=FakeEngineFactory(script), listener=lambda _: None)
    controller.load_model(tmp_path / "model.gguf")
    controller.new_session()
    controller.send("Hello there.")
    first = controller.generate_reply()
    script.template = ChatTemplate.load(source)  # thinking on, as after a change of the config
    controller.load_model(tmp_path / "model.gguf")  # the same file: its frozen tokens stay

    controller.regenerate(first.id)
    again = controller.generate_reply()
    controller.send("And now?")
    fresh = controller.generate_reply()

    assert again.parent_id == first.parent_id
    assert [m.stats.opened_in_reasoning for m in (first, again, fresh)] == [False, False, True]


@pytest.mark.engine
def test_a_real_tokenizer_gives_the_prompt_the_same_tokens(tmp_path, store):
    """The check above compares the prompt's ids with the generation prompt tokenized alone;
    over a real vocabulary they must agree, or no reply would ever open in reasoning."""
    from dataclasses import replace

    from sessions.synth import make_model
    from tests.real_controller import real_controller

    with real_controller(tmp_path, store, n_batch=64, max_tokens=4) as controller:
        controller.settings = replace(controller.settings, chat_template_file=TEMPLATES / "Qwen3.5-4B.jinja")
        controller.load_model(make_model("llama", "tiny"))
        controller.new_session(system_prompt="Be brief.")
        controller.send("Hello there.")
        assert controller.generate_reply().stats.opened_in_reasoning
