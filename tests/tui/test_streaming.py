"""Replies while they are written: stopping, untrusted text, a model still loading."""

from __future__ import annotations

import re
import threading

from sessions import events as core
from tests.tui.helpers import (
    main_screen,
    ready,
    reply_text,
    send,
    settle,
    shown_cost,
    shown_texts,
    type_text,
    wait_for,
)
from tui import events
from tui.startup import StartupRequest


async def test_escape_stops_a_reply_half_way_and_keeps_what_was_written(make_app, script):
    script.replies = ["one two three four five six"]
    script.hold_after = 2
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await type_text(pilot, "tell me")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.jobs.generating and "two" in reply_text(screen), "the reply to start")
        await type_text(pilot, "typing on")  # the input stays usable while the reply streams
        assert screen.chat_input.text == "typing on"
        await pilot.press("escape")
        await settle(pilot)
        reply = screen.controller.snapshot().head
        assert reply.role == "assistant" and reply.text == "one two "
        assert reply.stats.stop_reason == "cancelled"
        assert shown_texts(screen)[-1] == ("assistant", "one two ")
        assert "stopped" in screen.conversation_view.views[-1].header_plain
        assert screen.conversation_view.reply_view is None


async def test_escape_sequences_in_model_output_are_shown_inert(make_app, script):
    script.replies = ["Look: \x1b[31mred\x1b[0m, a bell\x07 and \x1b]52;c;aGk=\x07 [b]markup[/b]"]
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "say something odd")
        stored = screen.controller.snapshot().head
        assert "\x1b" in stored.text  # the store keeps exactly what the model wrote
        shown = screen.conversation_view.views[-1].body.source
        assert "\x1b" not in shown and "\x07" not in shown
        assert "␛[31mred␛[0m" in shown and "␇" in shown
        assert "[b]markup[/b]" in shown  # square brackets are text, not style


async def test_a_message_sent_while_the_model_loads_is_answered_after_the_load(make_app, script, fake_model):
    script.load_gate = threading.Event()
    app = make_app(startup=StartupRequest(model_path=fake_model))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main_screen(pilot)
        await wait_for(pilot, lambda: screen.jobs.loading and screen.progress.active, "the load to start")
        await type_text(pilot, "early bird")
        await pilot.press("enter")
        await pilot.pause()
        assert shown_texts(screen) == [("user", "early bird")]
        assert screen.reply_wanted
        script.load_gate.set()
        await wait_for(pilot, lambda: len(shown_texts(screen)) == 2, "the reply")
        await settle(pilot)
        assert shown_texts(screen)[1][0] == "assistant"
        assert not screen.progress.active


async def test_prompt_progress_shows_tokens_and_time_left(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        screen.post_message(events.CoreEvent(core.PromptProgressed(250, 1000, 50.0)))
        await wait_for(pilot, lambda: screen.progress.active, "the progress bar")
        assert "250/1,000 tokens" in screen.progress.label_text
        assert "about 15 s left" in screen.progress.label_text


async def test_a_slow_switch_is_announced_before_it_runs(make_app, script):
    script.replies = ["short"]
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        screen.chat_input.insert("a long question " * 20)  # typing 320 keys adds nothing here
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("ctrl+r")
        await settle(pilot)
        engine = screen.controller.engine
        engine.saved.clear()  # as if the checkpoints had been evicted
        engine.live = []
        script.prepare_gate = threading.Event()
        await pilot.press("alt+left")
        await wait_for(pilot, lambda: screen.jobs.running("warm"), "the branch to be warmed")
        assert "switching will evaluate" in screen.status.text_of("note")
        script.prepare_gate.set()
        await settle(pilot)
        assert screen.status.text_of("note") == ""
        restored, evaluated = shown_cost(screen)
        assert restored == 0 and evaluated > 256


async def test_paging_while_a_reply_is_written_stops_it_first_then_switches(make_app, script):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        first_version = shown_texts(screen)[1]
        await pilot.press("ctrl+r")
        await settle(pilot)
        script.replies = ["a long answer that will be cut short"]
        script.hold_after = 3
        await type_text(pilot, "go on")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "long" in reply_text(screen),
                       "the reply to start")
        await pilot.press("ctrl+up", "ctrl+up", "alt+left")  # the first reply, back one version
        await settle(pilot)
        assert not screen.jobs.generating
        assert shown_texts(screen) == [("user", "hello"), first_version]
        assert "‹ 1/2 ›" in screen.conversation_view.views[1].header_plain
        tree = screen.controller.snapshot().tree
        cut = [m for m in tree.leaves() if m.role == "assistant" and m.stats and m.stats.stop_reason == "cancelled"]
        assert [m.text for m in cut] == ["a long answer "]  # the stopped reply is kept on its branch


async def test_quitting_while_a_reply_is_written_stops_it_and_keeps_it(make_app, script):
    script.replies = ["one two three four"]
    script.hold_after = 1
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await type_text(pilot, "hi")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "one" in reply_text(screen),
                       "the reply to start")
        await pilot.press("ctrl+q")
    assert app.return_code == 0
    app.controller.close()  # what the runtime does once the app has stopped: waits for the job
    head = app.controller.snapshot().head
    assert (head.role, head.text, head.stats.stop_reason) == ("assistant", "one ", "cancelled")


async def test_the_context_meter_follows_a_reply_being_written(make_app, script):
    script.replies = ["one two three four five six"]
    script.hold_after = 3
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await type_text(pilot, "count with me")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "three" in reply_text(screen), "the reply to start")
        await wait_for(pilot, lambda: "?" not in screen.status.text_of("context"), "the meter to follow")
        assert re.fullmatch(r"ctx [\d,]+/4,096", screen.status.text_of("context"))
        await pilot.press("escape")
        await settle(pilot)
