"""Sessions across app runs, and the start-up paths."""

from __future__ import annotations

from tests.tui.helpers import headers, main_screen, ready, send, settle, shown_texts, type_text, wait_for
from tui.startup import StartupRequest


async def test_a_new_app_reopens_the_last_session_as_it_was_left(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await send(pilot, "one")
        await send(pilot, "two")
        await pilot.press("ctrl+r")
        screen = await settle(pilot)
        await pilot.press("alt+left")  # leave the chat on the first version of the last reply
        await settle(pilot)
        left = shown_texts(screen)
        left_headers = headers(screen)
        session_id = screen.controller.session_id
        await pilot.press("ctrl+q")
    assert app.return_code == 0

    again = make_app(startup=StartupRequest())  # no flags: the last session
    async with again.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        assert screen.controller.session_id == session_id
        assert shown_texts(screen) == left
        assert headers(screen) == left_headers
        assert "‹ 1/2 ›" in headers(screen)[-1]
        assert screen.status.text_of("model") == "Fake Model 1B · plain"


async def test_new_session_starts_empty_and_keeps_the_old_one(make_app):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        first = screen.controller.session_id
        await pilot.press("ctrl+n")
        await settle(pilot)
        assert screen.controller.session_id is None  # saved with its first message
        assert shown_texts(screen) == []
        assert [s.id for s in screen.controller.library.list_sessions()] == [first]
        await send(pilot, "a second chat")
        assert screen.controller.session_id not in (None, first)
        assert len(screen.controller.library.list_sessions()) == 2


async def test_session_flag_opens_that_session(make_app, fake_model):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "in the first chat")
        first = screen.controller.session_id
        await pilot.press("ctrl+n")
        await settle(pilot)
        await send(pilot, "in the second chat")
    again = make_app(startup=StartupRequest(session_id=first))
    async with again.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        assert shown_texts(screen)[0] == ("user", "in the first chat")


async def test_demo_start_says_the_replies_are_random(make_app, monkeypatch, fake_model):
    import sessions.synth

    monkeypatch.setattr(sessions.synth, "make_model", lambda arch, size="tiny", **kw: fake_model)
    app = make_app(startup=StartupRequest(demo=True))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main_screen(pilot)
        await wait_for(pilot, lambda: screen.jobs.model_ready, "the demo model")
        banner = screen.query_one("#demo-banner")
        assert banner.has_class("-visible") and banner.region.height > 0
        assert "random text" in str(banner.render())
        assert screen.controller.engine.info.path == fake_model


async def test_a_demo_model_that_cannot_be_made_is_said_in_words(make_app, monkeypatch):
    import sessions.synth

    def disk_full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sessions.synth, "make_model", disk_full)
    app = make_app(startup=StartupRequest(demo=True))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main_screen(pilot)
        said = lambda: [n.message for n in app._notifications if "could not be made" in n.message]  # noqa: E731
        await wait_for(pilot, lambda: said() and screen.gestures.idle, "the failure")
        assert said()[0].startswith("the demo model could not be made: ") and "No space left" in said()[0]
        assert screen.controller.model_info is None and app.is_running


async def test_with_nothing_to_reopen_the_model_picker_comes_first(make_app, fake_model):
    from tui.screens.model_picker import ModelPicker

    app = make_app(startup=StartupRequest())
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ModelPicker), "the model picker")
        app.screen.dismiss(fake_model)  # as if the user picked it
        screen = await ready(pilot)
        assert screen.controller.engine.info.path == fake_model
        assert screen.controller.session_id is None  # a new chat, saved with its first message
        await send(pilot, "hello")
        assert [role for role, _ in shown_texts(screen)] == ["user", "assistant"]
        assert screen.controller.snapshot().session.model_path == str(fake_model)


async def test_rename_and_export_the_chat(make_app, tmp_path):
    from textual.widgets import Input

    from tui.screens.dialogs import ExportScreen, TextPrompt

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        await pilot.press("f3")
        await wait_for(pilot, lambda: isinstance(app.screen, TextPrompt), "the rename prompt")
        await type_text(pilot, "Greetings")  # the old title is selected, typing replaces it
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, TextPrompt), "the prompt to close")
        await pilot.pause()
        assert screen.controller.snapshot().session.title == "Greetings"
        assert screen.conversation_view.border_title == "Greetings"

        target = tmp_path / "chat.md"
        await pilot.press("f4")
        await wait_for(pilot, lambda: isinstance(app.screen, ExportScreen), "the export dialog")
        app.screen.query_one("#export-path", Input).value = str(target)
        app.screen.query_one("#export-path", Input).focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, ExportScreen), "the export to finish")
        assert "hello" in target.read_text()
        assert any(str(target) in n.message for n in app._notifications)


async def test_session_and_model_flags_open_that_session_with_that_model(make_app, fake_model):
    other = fake_model.with_name("other-model.gguf")
    other.write_bytes(b"GGUF another fake model")
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "in the first chat")
        first = screen.controller.session_id
    again = make_app(startup=StartupRequest(session_id=first, model_path=other))
    async with again.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        assert screen.controller.session_id == first
        assert shown_texts(screen)[0] == ("user", "in the first chat")
        assert screen.controller.engine.info.path == other


async def test_starts_left_unused_save_nothing_and_the_last_real_chat_reopens(make_app, fake_model):
    from sessions.store import SessionStore

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "a real conversation")
        real = screen.controller.session_id
    with SessionStore.open() as store:
        store.create_session()  # an empty one, as older versions left for every start
    for _ in range(2):  # -m starts, and a Ctrl+N, left unused
        unused = make_app()
        async with unused.run_test(size=(100, 30)) as pilot:
            await ready(pilot)
            await pilot.press("ctrl+n")
            await settle(pilot)
    again = make_app(startup=StartupRequest())
    async with again.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        assert screen.controller.session_id == real
        assert shown_texts(screen)[0] == ("user", "a real conversation")
        assert len(screen.controller.library.list_sessions()) == 2  # the real one and the old empty one


def old_chat(title: str, at: float) -> int:
    """A chat last changed at ``at`` (an import keeps its file's times), with no model of its own."""
    from sessions.store import SessionStore
    from sessions.store.records import NewMessage

    with SessionStore.open() as store:
        session = store.create_session(title=title, created_at=at)
        store.add_messages(session.id, [NewMessage(parent=None, role="user", text="hello from 2023", created_at=at),
                                        NewMessage(parent=0, role="assistant", text="hi", created_at=at)])
        return session.id


async def test_opening_an_old_chat_with_a_model_loaded_keeps_its_date(make_app, fake_model):
    """The walk-through's steps: an imported 2023 chat opened with --session, then the other
    with the session list, a model loaded and nothing sent: neither jumps to "just now"."""
    from sessions.store import SessionStore
    from tests.tui.helpers import settle, wait_for

    first, second = old_chat("from 2023", 1_690_000_000.0), old_chat("older still", 1_680_000_000.0)
    app = make_app(startup=StartupRequest(session_id=first, model_path=fake_model))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main_screen(pilot)
        await wait_for(pilot, lambda: screen.jobs.model_ready, "the model")
        await settle(pilot)
        await pilot.press("ctrl+l")
        panel = screen.session_list
        await wait_for(pilot, lambda: panel.has_class("-open"), "the session list")
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: screen.controller.session_id == second, "the other chat")
        await settle(pilot)
    with SessionStore.open() as store:
        assert [(s.id, s.updated_at) for s in store.list_sessions()] == [(first, 1_690_000_000.0),
                                                                         (second, 1_680_000_000.0)]
