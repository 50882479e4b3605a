"""A reply whose prompt opened its reasoning block is shown as reasoning from its first word.

DeepSeek-R1's, Qwen3.5's and Nemotron's generation prompts end in ``<think>``: the model
writes its reasoning with no opening marker, then ``</think>`` and the answer. Shown
without that knowledge, the reasoning streamed into the answer until ``</think>`` came,
and a reply stopped inside its reasoning was shown whole as the answer.
"""

from __future__ import annotations

from sessions.templates.chat_template import ChatTemplate
from tests.conftest import SHARED
from tests.tui.helpers import ready, reply_text, send, settle, start_reply_until_thinking
from tui.widgets.reasoning_view import ReasoningView

R1 = SHARED / "templates" / "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"
THOUGHT = "The user greets me. A greeting back is polite and short.</think>Hello to you too!"


def reasoning_of(view) -> str:
    return str(view.query_one(ReasoningView).render())


async def test_reasoning_opened_by_the_prompt_streams_as_reasoning(make_app, script):
    script.template = ChatTemplate.load(R1.read_text())
    script.replies = [THOUGHT]
    script.hold_after = 6  # inside the reasoning, until it is cancelled
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        screen = await start_reply_until_thinking(pilot, "hello")
        assert reply_text(screen) == ""  # nothing of the reasoning in the answer
        await pilot.press("escape")
        await settle(pilot)
        stopped = screen.controller.snapshot().head
        assert stopped.stats.opened_in_reasoning and "</think>" not in stopped.text
        shown = screen.conversation_view.views[-1]
        assert shown.message.id == stopped.id
        assert shown.body.source == ""  # stopped inside its reasoning: no answer yet
        assert reasoning_of(shown).startswith("▸ reasoning, cut off · 6 words")  # stored: no longer thinking


async def test_a_whole_reply_shows_its_answer_and_folds_its_reasoning(make_app, script):
    script.template = ChatTemplate.load(R1.read_text())
    script.replies = [THOUGHT]
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        screen = await send(pilot, "hello")
        reply = screen.conversation_view.views[-1]
        assert reply.message.text == THOUGHT and reply.message.stats.opened_in_reasoning
        assert reply.body.source == "Hello to you too!"
        assert reasoning_of(reply).startswith("▸ reasoning · 11 words")



async def test_versions_opened_in_reasoning_stay_reasoning_when_paged_while_written(make_app, script):
    from sessions.sampling import SamplingSettings
    from tests.tui.helpers import wait_for
    from tests.tui.test_several_versions import ask_for

    script.template = ChatTemplate.load(R1.read_text())
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        screen.controller.set_sampling(SamplingSettings(temperature=0.8))
        await send(pilot, "hello")
        script.replies = ["First thought here.</think>One.", "Second thought there.</think>Two."]
        script.hold_after = 2  # two words of each, inside the reasoning
        await ask_for(pilot, app, "2")
        view = lambda: screen.conversation_view.reply_view  # noqa: E731
        await wait_for(pilot, lambda: view() is not None and "thinking… · 2 words" in reasoning_of(view()),
                       "the first version thinking")
        await pilot.press("alt+right")
        await wait_for(pilot, lambda: "‹ 2/2 ›" in view().header_plain, "the second version shown")
        await pilot.pause()
        assert "thinking… · 2 words" in reasoning_of(view())
        assert reply_text(screen) == ""  # its reasoning, not streamed into its answer
        await pilot.press("escape")
        await settle(pilot)
