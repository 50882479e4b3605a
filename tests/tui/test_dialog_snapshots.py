"""Snapshots of the dialogs over the chat: the chat picker with words typed, renaming,
exporting (and the second press it asks before replacing a file), importing, the
question before a chat's model changes, and the command palette.
(Deleting is ``test_delete_snapshots``'; the model and file pickers are
``test_what_you_see_snapshots``' and ``test_new_user_snapshots``'.)

The chats are written straight into the store (fixed texts and times), at the size of
``test_main_snapshots``.
"""

from __future__ import annotations

from textual.command import CommandList, CommandPalette
from textual.widgets import Input

from sessions.store import SessionStore
from sessions.tree import GenerationStats
from tests.tui.helpers import type_text, wait_for
from tests.tui.test_hostile_models import alien_model
from tests.tui.test_main_snapshots import SIZE, quiet, write_chat
from tui.screens.dialogs import ChoiceScreen, ExportScreen, TextPrompt
from tui.screens.model_picker import ModelPicker
from tui.screens.session_picker import SessionPicker
from tui.startup import StartupRequest


def other_chats() -> None:
    """Three more chats, one of them about alpacas in its words only."""
    with SessionStore.open() as store:
        for at, title, ask, answer in (
            (10.0, "Planning the garden", "When do I plant garlic?", "In autumn, before the ground freezes."),
            (20.0, "Wool", "Which animals give the softest wool?", "Alpacas and cashmere goats."),
            (30.0, "Rust lifetimes", "What does 'a mean?", "A lifetime parameter named a."),
        ):
            session = store.create_session(title=title, created_at=at)
            asked = store.add_message(session.id, None, "user", ask, created_at=at + 1)
            store.add_message(session.id, asked.id, "assistant", answer, created_at=at + 2,
                              stats=GenerationStats(tokens_generated=9, stop_reason="eog"))


def test_the_chat_picker_with_words_typed(snap_compare, make_app, fake_model):
    chat = write_chat(fake_model)
    other_chats()
    app = make_app(startup=StartupRequest(session_id=chat))

    async def typed(pilot):
        await quiet(pilot)
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SessionPicker), "the chat picker")
        picker = pilot.app.screen
        await wait_for(pilot, lambda: picker.loaded, "the chats listed")
        picker.query_one(Input).cursor_blink = False
        await type_text(pilot, "alpaca")
        await pilot.app.workers.wait_for_complete()  # the words searched in the messages
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=typed)


async def prompt_open(pilot, key: str, kind: type) -> None:
    await quiet(pilot)
    await pilot.press(key)
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, kind), f"the dialog of {key}")
    for box in pilot.app.screen.query(Input):
        box.cursor_blink = False


def test_renaming_the_chat(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def rename(pilot):
        await prompt_open(pilot, "f3", TextPrompt)

    assert snap_compare(app, terminal_size=SIZE, run_before=rename)


def test_exporting_the_chat(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def export(pilot):
        await prompt_open(pilot, "f4", ExportScreen)

    assert snap_compare(app, terminal_size=SIZE, run_before=export)


def test_exporting_over_a_file_asks_for_a_second_press(snap_compare, make_app, fake_model, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    chat = write_chat(fake_model)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / f"llamachat-{chat}.md").write_text("an earlier export\n")
    app = make_app(startup=StartupRequest(session_id=chat))

    async def over_a_file(pilot):
        await prompt_open(pilot, "f4", ExportScreen)
        pilot.app.screen.query_one("#export-path", Input).focus()
        await pilot.press("enter")
        error = pilot.app.screen.query_one("#dialog-error")
        await wait_for(pilot, lambda: "already exists" in str(error.render()), "the question")

    assert snap_compare(app, terminal_size=SIZE, run_before=over_a_file)


def test_importing_chats(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def import_(pilot):
        await prompt_open(pilot, "alt+i", TextPrompt)

    assert snap_compare(app, terminal_size=SIZE, run_before=import_)


def test_the_question_before_the_chat_changes_model(snap_compare, make_app, fake_model, tmp_path, monkeypatch):
    for variable in ("HOME", "HF_HOME", "XDG_CACHE_HOME", "HF_HUB_CACHE", "LLAMA_CACHE"):
        monkeypatch.setenv(variable, str(tmp_path / "elsewhere"))  # no model this machine happens to hold
    other = alien_model(tmp_path / "models").rename(tmp_path / "models" / "other-model.gguf")  # a GGUF header the
    # picker reads, of a fixed size (the fake engine loads any file)
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def asked(pilot):
        await quiet(pilot)
        await pilot.press("f5")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ModelPicker), "the model picker")
        picker = pilot.app.screen
        await wait_for(pilot, lambda: picker.discovered, "the models found")
        picker.query_one("#model-path", Input).value = str(other)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ChoiceScreen), "the question")

    assert snap_compare(app, terminal_size=SIZE, run_before=asked)


def test_the_command_palette_with_words_typed(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def typed(pilot):
        await quiet(pilot)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, CommandPalette), "the palette")
        palette = pilot.app.screen
        palette.query_one(Input).cursor_blink = False
        await type_text(pilot, "version")
        commands = palette.query_one(CommandList)
        await wait_for(pilot, lambda: commands.option_count == 3, "the three commands about versions")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=typed)
