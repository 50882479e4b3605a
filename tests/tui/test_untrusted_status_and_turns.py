"""Untrusted text in statuses and tooltips is never markup; a continued reply's stored text
is drawn inert; a reply wanted before a load belongs to its chat and gives its turn back
when the load fails; saved marks are never asked for on the UI thread while a job runs."""

from __future__ import annotations

from textual.widgets import Input, Static
from textual.widgets._tooltip import Tooltip

from sessions.api.chat import SessionController
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from sessions.templates.chat_template import ChatTemplate
from tests.tui.fake_engine import FakeEngineFactory
from tests.tui.helpers import main_screen, ready, reply_text, send, settle, shown_texts, type_text, wait_for
from tests.tui.test_pickers import HostApp, add_session
from tui.screens import opening_flow
from tui.screens.model_picker import ModelPicker
from tui.screens.session_picker import SessionPicker
from tui.startup import StartupRequest

HOSTILE = "[/] [link=https://example.com]click[/link] [b]bold"


async def test_a_query_that_looks_like_markup_is_quoted_as_text_when_nothing_matches():
    with SessionStore.open() as store:
        add_session(store, "Alpha", "a")
        controller = SessionController(store, engine_factory=FakeEngineFactory())
        app = HostApp()
        async with app.run_test() as pilot:
            picker = SessionPicker(controller.library)
            app.open(picker)
            await pilot.app.workers.wait_for_complete()
            await wait_for(pilot, lambda: picker.loaded, "the sessions")
            picker.query_one(Input).value = HOSTILE
            await pilot.app.workers.wait_for_complete()
            await pilot.pause()
            status = str(picker.query_one("#picker-status", Static).render())
            assert app.is_running and picker.shown_ids == []
            assert "Nothing matches" in status and "[link=https://example.com]click[/link]" in status


async def test_the_stored_text_of_a_continued_reply_is_drawn_inert_while_it_streams(make_app, script):
    script.replies = ["\x1b[31mred\x1b[0m one two three four five six seven.", "eight."]
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        screen.controller.set_sampling(SamplingSettings(temperature=0.0, max_tokens=24))
        await send(pilot, "count")
        assert "\x1b" in screen.controller.snapshot().head.text
        script.hold_after = 0  # the continuation waits before its first word
        await pilot.press("ctrl+g")
        await wait_for(pilot, lambda: "red" in reply_text(screen), "the continued text")
        assert "\x1b" not in reply_text(screen) and "␛[31mred" in reply_text(screen)
        await pilot.press("escape")
        await settle(pilot)


async def test_a_template_fallback_reason_that_looks_like_markup_is_a_plain_tooltip(make_app, script):
    script.template = ChatTemplate.builtin("chatml", reason=HOSTILE)
    app = make_app()
    async with app.run_test(size=(100, 30), tooltips=True) as pilot:
        screen = await ready(pilot)
        label = screen.query_one("#status-model")
        await pilot.hover(label)
        screen._handle_tooltip_timer(label)  # what the hover's timer does
        tooltip = screen.get_child_by_type(Tooltip)
        await wait_for(pilot, lambda: tooltip.display, "the tooltip")
        await pilot.pause()
        assert app.is_running
        assert HOSTILE in str(tooltip.render())


async def test_a_reply_wanted_before_a_load_is_not_given_to_the_chat_opened_next(make_app, script, fake_model):
    with SessionStore.open() as store:
        other = store.create_session(title="Other chat")
        store.add_message(other.id, None, "user", "question of the other chat")
    app = make_app(startup=StartupRequest())  # reopens the other chat: no model to load
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ModelPicker), "the model picker")
        await pilot.press("escape")
        screen = main_screen(pilot)
        await wait_for(pilot, lambda: app.screen is screen, "the chat")
        await pilot.press("ctrl+n")
        await settle(pilot)
        screen.chat_input.focus()
        await type_text(pilot, "hello")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.reply_wanted, "the reply to wait for a model")
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionPicker) and app.screen.loaded, "the picker")
        await type_text(pilot, "Other")
        await pilot.app.workers.wait_for_complete()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelPicker), "the model picker")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, "the chat")
        # What choosing the model in the picker does (the fake model file is no real GGUF).
        await screen.gestures.when_idle(lambda: opening_flow.switch_to_model(screen, fake_model))
        await wait_for(pilot, lambda: screen.jobs.model_ready, "the model")
        await settle(pilot)
        assert screen.controller.session_id == other.id
        assert shown_texts(screen) == [("user", "question of the other chat")]
        assert script.made == 0


async def test_saved_marks_are_kept_while_a_job_holds_the_engine_and_come_back_after(make_app, script):
    """The controller does not put the question to an engine a job holds (it answers None):
    the marks shown stay as they were, and the end of the job redraws them."""
    app = make_app()
    async with app.run_test(size=(120, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        await pilot.press("ctrl+t")

        def marks() -> dict[int, bool]:
            return {node.data.message_id: node.data.saved
                    for node in screen.tree_panel.message_tree._tree_nodes.values() if node.data is not None}

        answers: list[dict | None] = []
        ask = screen.controller.routes.checkpoint_tiers

        def checkpoint_tiers(message_ids=None):
            answers.append(ask(message_ids))
            return answers[-1]

        screen.controller.routes.checkpoint_tiers = checkpoint_tiers  # type: ignore[method-assign]
        script.hold_after = 2
        screen.chat_input.focus()
        await type_text(pilot, "again")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "Reply" in reply_text(screen), "the reply to stream")
        shown = marks()
        answers.clear()
        screen.refresh_panels()  # what any redraw does while the reply is written
        await wait_for(pilot, lambda: bool(answers), "the marks asked for")
        assert answers == [None] and {k: v for k, v in marks().items() if k in shown} == shown
        assert any(shown.values())  # marks that a blank answer would have taken away
        await pilot.press("escape")
        await settle(pilot)
        head = screen.controller.snapshot().head
        assert marks()[head.id]
