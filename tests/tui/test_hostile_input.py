"""Hostile input in the app: escapes from the model, a megabyte paste, an overlong branch.

What the terminal would receive is read from the screen's real render (the text of every
segment Textual would write): it must hold no ESC, BEL or C1 control, whatever the model,
the chat file or a paste contained. The other tests drive the keys a user would press
and check the outcome is a choice or a plain-words message, never a lost message.
"""

from __future__ import annotations

import io
import re
import threading
from dataclasses import replace

from rich.console import Console
from textual import events

from sessions import events as core
from tests.tui.fake_engine import FakeEngineFactory
from tests.tui.helpers import main_screen, ready, reply_text, send, settle, shown_texts, type_text, wait_for
from tui.screens import job_flow
from tui.screens.dialogs import ConfirmScreen, ExportScreen
from tui.screens.session_picker import SessionPicker
from tui.startup import StartupRequest
from tui.widgets.message_view import SHOWN_CHARS

EVIL = ("Hi \x1b]0;pwned\x07 \x1b]52;c;SGVsbG8=\x07 \x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\ "
        "\x1b[2J\x1b[H\x1b[31mred\x1b[0m \x9b31m \x90dcs\x9c bell\x07 over\rwrite end")
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""What must never reach the terminal as text (newline and tab are ordinary text)."""


def terminal_text(app) -> str:
    """The text Textual would write for the current screen (styles and moves left out)."""
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(),
                      force_terminal=True, color_system="truecolor", legacy_windows=False)
    return "".join(segment.text for segment in console.render(update) if not segment.control)


def assert_inert(app, *, showing: str = "␛") -> None:
    text = terminal_text(app)
    assert not RAW.findall(text), f"raw control characters on screen: {RAW.findall(text)[:5]}"
    assert showing in text, f"expected {showing!r} on screen"


class EvilNamedFactory(FakeEngineFactory):
    """Fake engines whose GGUF name is hostile too (the status bar shows it)."""

    def __call__(self, path, settings, on_progress):
        engine = super().__call__(path, settings, on_progress)
        engine.info = replace(engine.info, name="Evil\x1b]0;title\x07Model")
        return engine


async def test_escape_sequences_from_the_model_and_the_chat_are_shown_inert(make_app, script, tmp_path):
    script.replies = [EVIL]
    script.hold_after = 6
    app = make_app()
    app.controller._factory = EvilNamedFactory(script)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = await ready(pilot)
        screen.controller.send("Title \x1b[2J\x9b" + EVIL)  # as an imported chat would hold it
        await screen.refresh_view()
        await job_flow.start_reply(screen)
        await wait_for(pilot, lambda: "␛" in reply_text(screen), "the reply to stream")
        assert_inert(app)  # while streaming
        script.hold_after = None
        await pilot.press("escape")
        await settle(pilot)
        assert screen.controller.snapshot().head.role == "assistant"
        assert_inert(app)  # the stored reply, the title, the status bar
        assert "title" in screen.status.text_of("model") and "\x1b" not in screen.status.text_of("model")

        await pilot.press("ctrl+t", "ctrl+l")  # the tree and the session list
        await pilot.pause()
        assert_inert(app, showing="Title ␛[2J")
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionPicker) and app.screen.loaded, "the picker")
        await type_text(pilot, "title")
        await pilot.pause()
        assert_inert(app, showing="Title ␛[2J")
        await pilot.press("escape")

        screen.app.forwarder(core.NoticeRaised("notice " + EVIL, "warning"))
        await wait_for(pilot, lambda: any("notice" in n.message for n in app._notifications), "the notice")
        await pilot.pause()
        assert_inert(app, showing="notice Hi ␛]0;pwned")

        await pilot.press("f1")
        await pilot.pause()
        assert not RAW.findall(terminal_text(app))
        await pilot.press("escape")

        await pilot.press("f9")  # copy: the terminal clipboard gets the exact text...
        assert app._clipboard.startswith("Hi \x1b]0;pwned")
        screen.chat_input.focus()
        await pilot.press("ctrl+v")  # ...but pasting it in the app draws it inert
        assert screen.chat_input.text.startswith("Hi ␛]0;pwned") and not RAW.findall(screen.chat_input.text)
        app.post_message(events.Paste("pasted \x1b[2J\r\nsecond line"))
        await pilot.pause()
        assert "pasted ␛[2J\nsecond line" in screen.chat_input.text
        assert_inert(app, showing="pasted ␛[2J")


async def test_export_keeps_the_text_as_data_and_the_dialog_shows_paths_inert(make_app, script, tmp_path):
    script.replies = [EVIL]
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
        await pilot.press("f4")
        await wait_for(pilot, lambda: isinstance(app.screen, ExportScreen), "the export dialog")
        path_input = app.screen.query_one("#export-path")
        path_input.value = ""
        path_input.focus()
        app.post_message(events.Paste(f"{tmp_path}/no\x1b[2Jdir/x.md"))
        await pilot.press("enter")
        await pilot.pause()
        assert_inert(app, showing="no␛[2Jdir")  # "the folder ... does not exist", drawn inert
        path_input.value = str(tmp_path / "chat.md")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, ExportScreen), "the export")
    assert EVIL in (tmp_path / "chat.md").read_bytes().decode()  # a file is not a terminal: exact text


async def test_a_megabyte_paste_keeps_the_app_responsive_and_gets_a_clear_answer(make_app):
    big = ("All work and no play makes Jack a dull boy. " * 23 + "\n") * 1000
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        screen.chat_input.focus()
        app.post_message(events.Paste(big))
        await wait_for(pilot, lambda: len(screen.chat_input.text) >= len(big), "the paste")
        assert not screen.chat_input.soft_wrap  # re-wrapping a megabyte per keystroke is too slow
        await type_text(pilot, "The end.")
        assert screen.chat_input.text.endswith("The end.")
        await pilot.press("enter")
        await settle(pilot)
        assert screen.chat_input.text == "" and screen.chat_input.soft_wrap
        notes = [n.message for n in app._notifications]
        assert any("alone does not fit" in note and "context holds 4,096" in note for note in notes)
        assert not isinstance(app.screen, ConfirmScreen)  # nothing older to leave out: no choice to offer
        head = screen.controller.snapshot().head
        assert head.role == "user" and head.text.endswith("The end.") and len(head.text) > len(big)
        view = screen.conversation_view.views[-1]
        assert len(view.body.source) == SHOWN_CHARS and "more characters not shown" in view.cut_note
        await pilot.press("f8")  # the advice is to shorten or drop it: drop it
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the delete question")
        await pilot.press("y")
        await settle(pilot)
        await send(pilot, "still here")  # the app goes on
        assert [role for role, _ in shown_texts(screen)] == ["user", "assistant"]
        assert shown_texts(screen)[0] == ("user", "still here")


async def test_an_overlong_branch_offers_a_new_branch_without_the_oldest_turns(make_app, script):
    script.n_ctx = 340  # about three turns of the fake model (one token per byte)
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        for n in range(4):
            await send(pilot, f"q{n}")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the overflow dialog")
        question = str(app.screen.query_one("#dialog-question").render())
        assert "tokens long and the context holds 340" in question and "new branch" in question
        await pilot.press("escape")  # cancel: nothing changes, the message waits
        await settle(pilot)
        tree = screen.controller.snapshot().tree
        old_path = list(screen.controller.snapshot().path)
        assert len(tree) == 7 and old_path[-1].text == "q3"

        await pilot.press("ctrl+r")  # answer it after all: the choice comes back
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the dialog again")
        await pilot.press("y")
        await settle(pilot)
        path = list(screen.controller.snapshot().path)
        assert [m.role for m in path][-2:] == ["user", "assistant"]
        assert path[-2].text == "q3"
        assert path[0].parent_id is None and path[0].id != old_path[0].id  # a new root
        assert [m.text for m in path[:-1]] == [m.text for m in old_path[len(old_path) - len(path) + 1:]]
        assert path[0].text != old_path[0].text  # without the oldest turn
        tree = screen.controller.snapshot().tree
        assert len(tree.roots()) == 2 and tree.path_to(old_path[-1].id) == old_path  # old branch intact
        assert screen.controller.context_used() <= 340
        assert "new branch" in screen.status.text_of("note")


def keys_in_one_read(app, text: str) -> None:
    """Post the keys as a terminal delivers fast typing: all at once, Enter included.

    The app reads them back to back; Enter, a priority binding, then ran before the
    letters had reached the input, found it empty, and the message was never sent.
    """
    names = {" ": "space", "\n": "ctrl+j", "\r": "enter"}
    for char in text:
        app.post_message(events.Key(names.get(char, char), None if char == "\n" else char))


async def test_enter_during_the_start_up_load_and_warm_up_is_answered_once_ready(make_app, script):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await send(pilot, "hello")
    for gate_name, group in (("load_gate", "load"), ("prepare_gate", "warm")):
        gate = threading.Event()
        setattr(script, gate_name, gate)
        again = make_app(startup=StartupRequest())  # reopen the last session
        async with again.run_test(size=(100, 30)) as pilot:
            screen = main_screen(pilot)
            await wait_for(pilot, lambda s=screen, g=group: s.jobs.running(g) and s.chat_input.has_focus, group)
            keys_in_one_read(again, f"sent\nduring {group}\r")
            sent = f"sent\nduring {group}"
            await wait_for(pilot, lambda s=screen, t=sent: s.controller.snapshot().head.text == t, "the message")
            assert screen.chat_input.text == ""
            gate.set()
            await settle(pilot)
            texts = shown_texts(screen)
            assert texts[-2] == ("user", sent) and texts[-1][0] == "assistant"
        setattr(script, gate_name, None)
