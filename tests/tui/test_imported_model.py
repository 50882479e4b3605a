"""A chat imported from a file names a model path; that path is never loaded unasked.

A shared file can name any path: a model file that crashes llama.cpp, one the user never
chose. Reopening the imported chat (a plain start reopens the last one) shows the model
picker with a note instead, and ``ask`` wants ``-m``; once the user has chosen a model
for the chat, it is the chat's own and reopens with it.
"""

from __future__ import annotations

import json

from sessions.cli import main
from sessions.store import SessionStore
from tests.tui.helpers import wait_for
from tui.screens.model_picker import ModelPicker
from tui.startup import StartupRequest


def shared_file(tmp_path, model_path) -> int:
    """Import a chat whose file names ``model_path`` (with a fingerprint, as our exports do)."""
    data = {"format": "llamachat-session", "format_version": 1,
            "session": {"title": "from a friend", "model_path": str(model_path), "model_fingerprint": "f" * 64,
                        "system_prompt": None, "sampling": {}, "created_at": 1.0, "active": 1},
            "messages": [{"id": 1, "parent": None, "role": "user", "text": "hi", "created_at": 1.0,
                          "tokens": {}}]}
    path = tmp_path / "shared.json"
    path.write_text(json.dumps(data))
    with SessionStore.open() as store:
        from sessions.exchange import import_file

        [session_id] = import_file(store, path)
        assert store.get_session(session_id).model_path == str(model_path)
        return session_id


async def test_reopening_an_imported_chat_asks_for_the_model_first(make_app, fake_model, tmp_path):
    shared_file(tmp_path, fake_model)  # a file that would load (the fake engine loads anything)
    app = make_app(startup=StartupRequest())  # plain `llamachat`: reopen the last chat
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ModelPicker), "the model picker")
        assert app.controller.engine is None and not app.controller._factory.engines
        assert any("was imported" in n.message and str(fake_model) in n.message for n in app._notifications)


async def test_a_model_chosen_for_an_imported_chat_becomes_its_own(make_app, fake_model, tmp_path):
    session_id = shared_file(tmp_path, fake_model)
    app = make_app(startup=StartupRequest(session_id=session_id, model_path=fake_model))  # chosen: -m
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.controller.model_info is not None, "the chosen model")
    with SessionStore.open() as store:
        assert store.get_session(session_id).model_to_reopen == str(fake_model)


def test_ask_wants_a_model_for_an_imported_chat(tmp_path, capsys):
    session_id = shared_file(tmp_path, tmp_path / "named-by-the-file.gguf")
    code = main(["ask", "--session", str(session_id), "hello"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert f"session {session_id} was imported" in err and "pass -m PATH" in err
    with SessionStore.open() as store:
        assert [m.text for m in store.messages(session_id)] == ["hi"]


async def test_a_chat_opened_from_the_list_goes_on_with_the_loaded_model_and_remembers_it(make_app, fake_model,
                                                                                          tmp_path):
    from pathlib import Path

    from sessions.exchange import import_file
    from tests.tui.helpers import ready, settle

    data = Path(__file__).resolve().parent.parent / "data" / "exchange" / "llamacpp_webui_single.json"
    with SessionStore.open() as store:
        [session_id] = import_file(store, data)
        assert store.get_session(session_id).model_path is None
    app = make_app()  # a new chat with the model
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await pilot.press("ctrl+l")
        await wait_for(pilot, lambda: screen.session_list.highlighted_id == session_id, "the imported chat listed")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.controller.session_id == session_id, "the chat opened")
        await settle(pilot)
        assert app.controller.model_info is not None and len(app.controller._factory.engines) == 1
    with SessionStore.open() as store:
        assert store.get_session(session_id).model_to_reopen == str(fake_model)  # `--session N` loads it
