"""Replies on screen: reasoning folded or dimmed, continuing a reply cut at its limit, the
speed while a reply streams, and when each message was written."""

from __future__ import annotations

import re

from sessions.stop_reason import StopReason
from tests.tui.helpers import (
    headers,
    ready,
    reply_text,
    send,
    settle,
    shown_texts,
    start_reply_until_thinking,
    wait_for,
)
from tui.widgets.message_note import message_time
from tui.widgets.reasoning_view import ReasoningView

THOUGHT = "<think>The user greets me. A greeting back is polite and short.</think>Hello to you too!"


async def test_reasoning_is_folded_shown_dimmed_on_the_key_and_stored_as_written(make_app, script):
    script.replies = [THOUGHT]
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        reply = screen.conversation_view.views[-1]
        assert reply.message.text == THOUGHT  # kept exactly as generated
        assert reply.body.source == "Hello to you too!"
        folded = str(reply.query_one(ReasoningView).render())
        assert folded.startswith("▸ reasoning · 11 words") and "f12" in folded and "greets" not in folded
        await pilot.press("f12")
        shown = str(reply.query_one(ReasoningView).render())
        assert shown == "The user greets me. A greeting back is polite and short."
        await pilot.press("f12")
        assert str(reply.query_one(ReasoningView).render()).startswith("▸ reasoning")


async def test_reasoning_streams_into_its_own_line(make_app, script):
    script.replies = [THOUGHT]
    script.hold_after = 6  # stop inside the thinking, until it is cancelled
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        screen = await start_reply_until_thinking(pilot, "hello")
        assert reply_text(screen) == ""  # nothing of the thinking in the answer
        assert re.search(r"\d+\.\d tok/s…", screen.status.text_of("speed"))
        await pilot.press("escape")
        await settle(pilot)


async def test_a_reply_cut_at_its_limit_is_continued_with_the_key(make_app, script):
    from sessions.sampling import SamplingSettings

    script.replies = ["One two three four five six seven eight nine ten.", "eleven twelve."]
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        screen.controller.set_sampling(SamplingSettings(temperature=0.0, max_tokens=20))
        await send(pilot, "count")
        cut = screen.controller.snapshot().head
        assert cut.stats.stop_reason == StopReason.LENGTH
        assert "cut at the length limit (^g continues)" in headers(screen)[-1]
        await pilot.press("ctrl+g")
        await settle(pilot)
        longer = screen.controller.snapshot().head
        assert longer.parent_id == cut.parent_id and longer.id != cut.id
        assert longer.text.startswith(cut.text) and longer.stats.tokens_evaluated == 0
        assert shown_texts(screen)[-1] == ("assistant", longer.text)
        assert "‹ 2/2 ›" in headers(screen)[-1]


async def test_what_cannot_be_continued_is_said_plainly(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")  # ends on its own: nothing to continue
        await pilot.press("ctrl+g")
        await pilot.pause()
        assert any("length limit, or stopped, can be continued" in n.message for n in app._notifications)


async def test_each_message_says_when_it_was_written(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        views = screen.conversation_view.views
        assert len(views) == 2
        assert all(f"  {message_time(view.message.created_at)}" in view.header_plain for view in views)


def test_message_times_are_as_short_as_is_clear():
    from datetime import datetime

    now = datetime(2025, 6, 15, 18, 30).timestamp()
    assert message_time(datetime(2025, 6, 15, 9, 5).timestamp(), now) == "09:05"
    assert message_time(datetime(2025, 3, 3, 14, 2).timestamp(), now) == "Mar 3 14:02"
    assert message_time(datetime(2024, 3, 3, 14, 2).timestamp(), now) == "2024-03-03"


async def test_a_reply_in_the_middle_of_a_branch_is_continued_in_place(make_app, script):
    from sessions.sampling import SamplingSettings

    script.replies = ["One two three four five six.", "Seven eight nine ten eleven.", "and more."]
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        screen.controller.set_sampling(SamplingSettings(temperature=0.0, max_tokens=20))
        await send(pilot, "count")
        await send(pilot, "go on")
        first = screen.controller.snapshot().path[1]
        await pilot.press("ctrl+up", "ctrl+up", "ctrl+up")
        assert screen.conversation_view.selected_id == first.id
        script.hold_after = 1  # the continuation waits after its first word, until it is stopped
        await pilot.press("ctrl+g")
        view = screen.conversation_view
        await wait_for(pilot, lambda: view.reply_view is not None and "and" in reply_text(screen), "streaming")
        assert [v.message_id for v in view.views] == [first.parent_id, None]  # in the reply's place
        assert reply_text(screen).startswith(first.text)
        await pilot.press("escape")
        await settle(pilot)
        texts = shown_texts(screen)
        assert [role for role, _ in texts] == ["user", "assistant"]
        assert texts[1][1] == first.text + "and "
