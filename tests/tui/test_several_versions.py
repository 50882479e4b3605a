"""Alt+R: several new versions of a reply, one after another, each a version of its own."""

from __future__ import annotations

from sessions.controller import SamplingSettings
from tests.tui.helpers import headers, ready, reply_text, send, settle, wait_for
from tui.screens.dialogs import TextPrompt


def replies(screen, question_id: int) -> list:
    return [m for m in screen.controller.snapshot().tree.children(question_id)]


async def ask_for(pilot, app, count: str) -> None:
    await pilot.press("ctrl+up", "alt+r")  # the reply
    await wait_for(pilot, lambda: isinstance(app.screen, TextPrompt), "the count asked for")
    await pilot.press("ctrl+a", "ctrl+k", *count, "enter")


async def test_three_more_versions_each_with_its_own_seed_and_no_prompt_evaluated(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        screen.controller.new_session()
        screen.controller.set_sampling(SamplingSettings(temperature=0.8, seed=7))
        await send(pilot, "tell me something")
        question = screen.controller.snapshot().head.parent_id
        await ask_for(pilot, app, "3")
        await wait_for(pilot, lambda: len(replies(screen, question)) == 4, "three more versions")
        await settle(pilot)
        versions = replies(screen, question)
        assert len({m.id for m in versions}) == 4 and screen.controller.snapshot().head.id == versions[-1].id
        assert all(m.stats.tokens_evaluated == 0 for m in versions[1:])  # the question's state, restored
        assert [s.seed for s in screen.controller.engine.sampled_with] == [7, 7, 8, 9]
        assert "‹ 4/4 ›" in headers(screen)[-1]


async def test_esc_stops_the_versions_still_to_come(make_app, script):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "tell me something")
        question = screen.controller.snapshot().head.parent_id
        script.hold_after = 1  # each reply waits after its first word until it is stopped
        await ask_for(pilot, app, "4")
        await wait_for(pilot, lambda: "Reply" in reply_text(screen), "the first new version")
        await pilot.press("escape")
        await settle(pilot)
        versions = replies(screen, question)
        assert len(versions) == 2  # the reply, and the one stopped: no more
        assert versions[-1].stats.stop_reason == "cancelled"
        assert screen.versions_left == 0


async def test_a_count_out_of_range_is_refused_in_words(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "tell me something")
        question = screen.controller.snapshot().head.parent_id
        await ask_for(pilot, app, "20")
        await wait_for(pilot, lambda: not isinstance(app.screen, TextPrompt), "the dialog to close")
        await settle(pilot)
        assert len(replies(screen, question)) == 1
        assert any("from 2 to 8" in str(n.message) for n in app._notifications)
