"""Alt+R: several new versions of a reply at once, streamed and paged while they are
written, each a version of its own once stored."""

from __future__ import annotations

from sessions.sampling import SamplingSettings
from tests.tui.helpers import headers, ready, reply_text, send, settle, wait_for
from tui.screens.dialogs import TextPrompt


def replies(screen, question_id: int) -> list:
    return [m for m in screen.controller.snapshot().tree.children(question_id)]


async def asked(pilot, screen) -> int:
    """A question answered at temperature 0.8 (versions need one above 0): its id."""
    screen.controller.set_sampling(SamplingSettings(temperature=0.8))
    await send(pilot, "tell me something")
    return screen.controller.snapshot().head.parent_id


async def ask_for(pilot, app, count: str) -> None:
    await pilot.press("ctrl+up", "alt+r")  # the reply
    await wait_for(pilot, lambda: isinstance(app.screen, TextPrompt), "the count asked for")
    await pilot.press("ctrl+a", "ctrl+k", *count, "enter")


async def test_three_versions_in_one_batch_each_with_its_own_seed(make_app):
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
        engine = screen.controller.engine
        versions = replies(screen, question)[1:]
        assert engine.batches == [3]  # one batch, after the question made live once
        assert [s.seed for s in engine.sampled_with[-3:]] == [7, 8, 9]
        assert [(m.stats.seed, m.stats.batch) for m in versions] == [(7, 3), (8, 3), (9, 3)]
        assert [m.stats.tokens_evaluated for m in versions][1:] == [0, 0]
        assert len({m.text for m in versions}) == 3
        assert screen.controller.snapshot().head.id == versions[0].id  # the one shown while written
        assert "‹ 2/4 ›" in headers(screen)[-1]


async def test_the_versions_page_while_they_are_written_and_esc_keeps_each_as_stopped(make_app, script):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        question = await asked(pilot, screen)
        script.replies = ["First version here.", "Second one there.", "Third text now."]
        script.hold_after = 1  # each version writes its first word, then waits to be stopped
        await ask_for(pilot, app, "3")
        await wait_for(pilot, lambda: reply_text(screen).startswith("First"), "the first version's first word")
        await pilot.press("alt+right")
        await wait_for(pilot, lambda: reply_text(screen).startswith("Second"), "the second version shown")
        assert "‹ 2/3 ›" in headers(screen)[-1]
        await pilot.press("alt+right", "alt+right")  # clamped at the last
        await wait_for(pilot, lambda: reply_text(screen).startswith("Third"), "the third version shown")
        assert "‹ 3/3 ›" in headers(screen)[-1]
        await pilot.press("alt+left")
        await wait_for(pilot, lambda: reply_text(screen).startswith("Second"), "back to the second")
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(replies(screen, question)) == 4, "the versions stored")
        await settle(pilot)
        versions = replies(screen, question)[1:]
        assert [m.text for m in versions] == ["First ", "Second ", "Third "]
        assert all(m.stats.stop_reason == "cancelled" for m in versions)
        assert screen.controller.snapshot().head.id == versions[1].id  # the one being read
        assert "‹ 3/4 ›" in headers(screen)[-1]


async def test_without_room_for_a_batch_the_versions_are_written_one_after_another(make_app, script):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        question = await asked(pilot, screen)
        script.versions_unavailable = True
        await ask_for(pilot, app, "2")
        await wait_for(pilot, lambda: len(replies(screen, question)) == 3, "two more versions")
        await settle(pilot)
        assert screen.controller.engine.batches == []
        assert not any(m.stats.batch for m in replies(screen, question))
        assert any("one after another" in str(n.message) for n in app._notifications)


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


async def test_at_temperature_0_the_versions_are_refused_in_a_sentence(make_app):
    app = make_app()  # the tests' chats sample greedily
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "tell me something")
        question = screen.controller.snapshot().head.parent_id
        await ask_for(pilot, app, "3")
        await wait_for(pilot, lambda: any("same reply" in str(n.message) for n in app._notifications),
                       "the refusal")
        await settle(pilot)
        assert len(replies(screen, question)) == 1 and screen.conversation_view.reply_view is None
        assert screen.controller.snapshot().head.parent_id == question  # the reply still shown
