"""Deleting a chat and importing chats from the keys, as ``llamachat delete`` and ``import`` do."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input

from tests.tui.helpers import ready, send, settle, shown_texts, wait_for
from tui.screens.dialogs import ConfirmScreen, TextPrompt

DATA = Path(__file__).resolve().parent.parent / "data" / "exchange"


async def test_the_open_chat_is_deleted_after_a_question_and_a_new_one_opens(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "keep me")
        kept = screen.controller.session_id
        await pilot.press("ctrl+n")
        await settle(pilot)
        await send(pilot, "delete me")
        doomed = screen.controller.session_id
        await pilot.press("ctrl+delete")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        question = str(app.screen.query_one("#dialog-question").render())
        assert "“delete me”" in question and "2 messages" in question
        await pilot.press("escape")  # Cancel: nothing goes
        await settle(pilot)
        assert {s.id for s in screen.controller.library.list_sessions()} == {kept, doomed}
        await pilot.press("ctrl+delete")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question again")
        await pilot.press("y")
        await settle(pilot)
        assert [s.id for s in screen.controller.library.list_sessions()] == [kept]
        assert screen.controller.session_id is None and shown_texts(screen) == []


async def test_the_chat_highlighted_in_the_session_list_is_the_one_deleted(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "older chat")
        older = screen.controller.session_id
        await pilot.press("ctrl+n")
        await settle(pilot)
        await send(pilot, "open chat")
        current = screen.controller.session_id
        await pilot.press("ctrl+l", "down")  # the list starts on the open chat; down is the older one
        assert screen.session_list.highlighted_id == older
        await pilot.press("ctrl+delete")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        assert "“older chat”" in str(app.screen.query_one("#dialog-question").render())
        await pilot.press("y")
        await settle(pilot)
        assert [s.id for s in screen.controller.library.list_sessions()] == [current]
        assert screen.controller.session_id == current


async def test_chats_are_imported_from_a_file_and_the_first_one_opens(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await pilot.press("alt+i")
        await wait_for(pilot, lambda: isinstance(app.screen, TextPrompt), "the path prompt")
        app.screen.query_one(Input).value = str(DATA / "llamacpp_webui_single.json")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.controller.session_id is not None, "the imported chat")
        await settle(pilot)
        assert shown_texts(screen)  # its messages are on screen
        assert any("Imported 1 chat" in n.message for n in app._notifications)

        await pilot.press("alt+i")
        await wait_for(pilot, lambda: isinstance(app.screen, TextPrompt), "the path prompt again")
        app.screen.query_one(Input).value = str(DATA / "nothing-here.json")
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("Could not import" in n.message for n in app._notifications), "why")


async def test_an_import_with_broken_conversations_names_them_and_opens_the_first_imported(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await pilot.press("alt+i")
        await wait_for(pilot, lambda: isinstance(app.screen, TextPrompt), "the path prompt")
        app.screen.query_one(Input).value = str(DATA / "chatgpt_conversations_broken.json")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.controller.session_id is not None, "the first imported chat")
        await settle(pilot)
        (note,) = [n for n in app._notifications if "Imported" in n.message]
        assert note.severity == "warning"
        assert note.message.startswith("Imported 2 chats; 2 conversations could not be read and were skipped:\n")
        assert "not imported: conversation 2 ('Lost in a sync') has no 'mapping' of messages" in note.message
        assert "not imported: conversation 4 ('Half written')" in note.message
        titles = {s.id: s.title for s in screen.controller.library.list_sessions()}
        assert sorted(titles.values()) == ["Capitals of Europe", "Weather and a picture"]
        assert titles[screen.controller.session_id] == "Capitals of Europe"
