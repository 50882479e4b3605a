"""No gesture leaves a chat that cannot be answered, on a template that wants alternating roles.

The fake engine renders with Gemma's own template here, which refuses two user messages in
a row; each path that used to leave such a pair is driven through the keys.
"""

from __future__ import annotations

import pytest

from sessions.templates.chat_template import ChatTemplate
from tests.tui.helpers import ready, send, settle, shown_texts, type_text, wait_for
from tui.screens.dialogs import ConfirmScreen
from tui.screens.model_picker import ModelPicker
from tui.startup import StartupRequest


@pytest.fixture(autouse=True)
def gemma(script, shared_dir):
    source = (shared_dir / "templates" / "google-gemma-2-2b-it.jinja").read_text()
    script.template = ChatTemplate.compile(source, name="gemma-2", origin="a test")


def notes(app) -> list[str]:
    return [n.message for n in app._notifications]


def assert_alternates(screen) -> None:
    path = screen.controller.snapshot().path
    assert all(not (a.role == b.role == "user") for a, b in zip(path, path[1:], strict=False))


async def test_two_sends_before_a_model_is_chosen_are_answered_once_it_is(make_app, fake_model):
    app = make_app(startup=StartupRequest())  # nothing to reopen: the picker comes first
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ModelPicker), "the model picker")
        await pilot.press("escape")
        screen = await settle(pilot)
        await send(pilot, "hello")
        await send(pilot, "is anyone there?")
        assert shown_texts(screen) == [("user", "hello\n\nis anyone there?")]
        assert any("Joined to your message above" in note for note in notes(app))
        await pilot.press("f5")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelPicker), "the picker again")
        app.screen.dismiss(fake_model)
        await ready(pilot)
        assert [role for role, _ in shown_texts(screen)] == ["user", "assistant"]
        assert not any("alternate" in note or "Could not" in note for note in notes(app))
        assert_alternates(screen)


async def test_cancel_in_the_too_long_dialog_then_send_again(make_app, script):
    script.n_ctx = 300
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        for n in range(8):
            await send(pilot, f"q{n}")
            if isinstance(app.screen, ConfirmScreen):
                break
        assert isinstance(app.screen, ConfirmScreen), "the branch never outgrew the context"
        await pilot.press("escape")  # Cancel: the question waits
        await settle(pilot)
        await type_text(pilot, "again")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the dialog again")
        assert shown_texts(screen)[-1] == ("user", f"q{n}\n\nagain")
        assert_alternates(screen)
        await pilot.press("y")  # go on in a shorter branch
        await settle(pilot)
        assert shown_texts(screen)[-2] == ("user", f"q{n}\n\nagain")
        assert shown_texts(screen)[-1][0] == "assistant"
        assert not any("alternate" in note or "Could not" in note for note in notes(app))
        assert_alternates(screen)
