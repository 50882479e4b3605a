"""Per-chat settings from the keys: the dialog, saved with the chat, used again on reopen,
a new system prompt as a new branch, and both in the exports."""

from __future__ import annotations

import json

from textual.widgets import Input, TextArea

from sessions.sampling import SamplingSettings
from tests.tui.helpers import ready, send, settle, shown_texts, wait_for
from tui.screens.settings_dialog import ChatSettingsScreen
from tui.startup import StartupRequest


async def open_settings(pilot) -> ChatSettingsScreen:
    await pilot.press("ctrl+s")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ChatSettingsScreen), "the settings dialog")
    return pilot.app.screen


def fill(dialog: ChatSettingsScreen, **values: str) -> None:
    for name, value in values.items():
        dialog.query_one(f"#settings-{name}", Input).value = value


async def save(pilot, dialog: ChatSettingsScreen) -> None:
    """Enter in a field saves, as the Save button does."""
    dialog.query_one("#settings-seed", Input).focus()
    await pilot.press("enter")
    await pilot.pause()


async def test_sampling_settings_are_checked_saved_and_used_after_a_reopen(make_app, tmp_path):
    app = make_app()
    async with app.run_test(size=(100, 32)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "hello")
        dialog = await open_settings(pilot)
        assert "Chat template: the built-in ChatML template" in str(dialog.query_one("#settings-template").render())
        fill(dialog, temperature="0.3", top_k="7", top_p="2", min_p="0.02", repeat_penalty="1.15",
             max_tokens="300", seed="42")
        await save(pilot, dialog)
        assert isinstance(app.screen, ChatSettingsScreen)  # refused: the field is named
        assert "Top-p must be at most 1" in str(dialog.query_one("#dialog-error").render())
        fill(dialog, top_p="0.9")
        await save(pilot, dialog)
        await settle(pilot)
        wanted = SamplingSettings(temperature=0.3, top_k=7, top_p=0.9, min_p=0.02, repeat_penalty=1.15,
                                  max_tokens=300, seed=42)
        assert screen.controller.snapshot().session.sampling == wanted
        await send(pilot, "again")
        assert screen.controller.engine.sampled_with[-1] == wanted
        session_id = screen.controller.session_id
        markdown = screen.controller.export_session(tmp_path / "chat.md", "markdown").read_text()
        assert "- Sampling: temperature 0.3, top-k 7, top-p 0.9, min-p 0.02, repeat penalty 1.15, " \
               "max tokens 300, seed 42" in markdown
        exported = json.loads(screen.controller.export_session(tmp_path / "chat.json", "json").read_text())
        assert exported["session"]["sampling"]["top_k"] == 7

    again = make_app(startup=StartupRequest(session_id=session_id))
    async with again.run_test(size=(100, 32)) as pilot:
        screen = await ready(pilot)
        await pilot.press("ctrl+r")  # regenerate: with the chat's own settings, not the defaults
        await settle(pilot)
        assert screen.controller.engine.sampled_with[-1] == wanted


async def test_a_new_system_prompt_starts_a_new_branch_and_the_old_one_stays(make_app, tmp_path):
    app = make_app()
    async with app.run_test(size=(100, 32)) as pilot:
        screen = await ready(pilot)
        await send(pilot, "first question")
        old_path = [m.id for m in screen.controller.snapshot().path]
        dialog = await open_settings(pilot)
        dialog.query_one("#settings-system", TextArea).load_text("You answer in French.")
        await save(pilot, dialog)
        await settle(pilot)
        assert shown_texts(screen) == [("system", "You answer in French.")]
        assert any("new branch" in n.message for n in app._notifications)
        await send(pilot, "second question")
        tree = screen.controller.snapshot().tree
        assert [m.id for m in tree.path_to(old_path[-1])] == old_path  # the old branch is untouched
        assert [m.role for m in tree.roots()] == ["user", "system"]
        assert [role for role, _ in shown_texts(screen)] == ["system", "user", "assistant"]
        markdown = screen.controller.export_session(tmp_path / "chat.md", "markdown").read_text()
        assert "## System prompt\n\nYou answer in French." in markdown


async def test_settings_of_a_new_chat_apply_from_its_first_message(make_app):
    app = make_app()
    async with app.run_test(size=(100, 32)) as pilot:
        screen = await ready(pilot)
        dialog = await open_settings(pilot)
        dialog.query_one("#settings-system", TextArea).load_text("Be brief.")
        fill(dialog, top_k="3")
        await save(pilot, dialog)
        await settle(pilot)
        assert screen.controller.session_id is None  # still nothing saved
        await send(pilot, "hello")
        assert [role for role, _ in shown_texts(screen)] == ["system", "user", "assistant"]
        assert screen.controller.snapshot().session.sampling.top_k == 3
        assert screen.controller.engine.sampled_with[-1].top_k == 3


async def test_the_settings_are_in_the_command_palette(make_app):
    app = make_app()
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(pilot)
        await pilot.press("ctrl+p")
        await pilot.press(*"chat settings")
        await pilot.pause()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ChatSettingsScreen), "the settings dialog")


async def test_the_system_prompt_box_has_its_label(make_app):
    from textual.widgets import Label

    app = make_app()
    async with app.run_test(size=(100, 32)) as pilot:
        await ready(pilot)
        dialog = await open_settings(pilot)
        box = dialog.query_one("#settings-system", TextArea)
        labels = [w for w in dialog.query(Label) if w.region.bottom <= box.region.y]
        assert any(str(label.render()) == "System prompt" for label in labels)
