"""Snapshots of what the app shows as it starts: the notice of a session database restored
from its backup, the problems of a config file, a model still loading, the demo model's
banner, and no model chosen.

The fake model here has a chat template of its own (the fake's default stands in for a
missing one, and says so at every start): the notices shown are the state's own.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sessions import cli
from sessions.store.backup import recovery_notice
from sessions.store.salvage import Salvage
from sessions.templates.chat_template import ChatTemplate
from tests.tui.helpers import main_screen, ready, wait_for
from tests.tui.test_delete_snapshots import toast_shown
from tests.tui.test_main_snapshots import SIZE
from tests.tui.test_what_you_see_snapshots import write_chat
from tui.screens.model_picker import ModelPicker
from tui.startup import StartupRequest

BACKUP_TAKEN = 1_750_000_000.0
"""When the backup restored was made (2025-06-15 15:06 UTC)."""


@pytest.fixture(autouse=True)
def own_template(script):
    script.template = ChatTemplate.builtin("chatml")


async def started(pilot) -> None:
    """The model loaded and the engine idle, the notices of the start left on screen."""
    screen = await ready(pilot)
    screen.chat_input.cursor_blink = False


def test_the_notice_of_a_database_restored_from_its_backup(snap_compare, make_app, fake_model):
    """The notice is the store's own sentence (``recovery_notice``) for a fixed recovery:
    the damaged file's name and the backup's time change with every real one."""
    aside = Path("/home/ada/.local/share/llamachat/sessions.sqlite3.corrupt-20250616-091500")
    salvage = Salvage(messages_found=3, messages_recovered=2, messages_lost=1, sessions_recovered=0, error=None)
    notice = recovery_notice("database disk image is malformed", BACKUP_TAKEN, aside, salvage, (4, 37))
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, "An answer.")), notices=[notice])

    async def told(pilot):
        await started(pilot)
        await toast_shown(pilot, "so it was replaced by its backup of 2025-06-15 15:06")

    assert snap_compare(app, terminal_size=SIZE, run_before=told)


def test_the_problems_of_the_config_file(snap_compare, make_app, fake_model, tmp_path, monkeypatch):
    """The problems as ``llamachat`` hands them to the app (its command line reads the file);
    the config's path is relative here, so that the picture names the same file everywhere."""
    (tmp_path / "config.toml").write_text('n_ctx = "large"\ntheme = "midnight-blue"\n\n[keys]\nteleport = "f12"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LLAMACHAT_CONFIG", "config.toml")
    options = cli.run([])
    assert not isinstance(options, int)
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, "An answer.")), config=options.config,
                   notices=list(options.config_problems))

    async def told(pilot):
        await started(pilot)
        for words in ("n_ctx must be a whole number", "[keys] teleport", "midnight-blue"):
            await toast_shown(pilot, words)

    assert snap_compare(app, terminal_size=SIZE, run_before=told)


def test_a_model_loading(snap_compare, make_app, fake_model, script):
    script.load_gate = gate = threading.Event()  # the load stops half way
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, "An answer.")))
    leave = app.exit

    def exit_once_loaded(*args, **kwargs) -> None:
        gate.set()  # the picture is taken; a load cannot be stopped, and the app waits for it
        leave(*args, **kwargs)

    app.exit = exit_once_loaded

    async def loading(pilot):
        screen = main_screen(pilot)
        await wait_for(pilot, lambda: screen.progress.label_text == "loading the model: 50%", "the load half way")
        screen.chat_input.cursor_blink = False

    assert snap_compare(app, terminal_size=SIZE, run_before=loading)


def test_the_demo_model_banner(snap_compare, make_app):
    app = make_app(startup=StartupRequest(demo=True))
    assert snap_compare(app, terminal_size=SIZE, run_before=started)


def test_no_model_chosen(snap_compare, make_app, tmp_path, monkeypatch):
    for variable in ("HOME", "HF_HOME", "XDG_CACHE_HOME", "HF_HUB_CACHE", "LLAMA_CACHE"):
        monkeypatch.setenv(variable, str(tmp_path / "elsewhere"))  # no model this machine happens to hold
    app = make_app(startup=StartupRequest())  # no chat saved, no model configured: the picker opens

    async def picker_closed(pilot):
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ModelPicker), "the model picker")
        await pilot.press("escape")
        screen = main_screen(pilot)
        await wait_for(pilot, lambda: "press F5" in screen.status.text_of("note"), "the note")
        screen.chat_input.cursor_blink = False

    assert snap_compare(app, terminal_size=SIZE, run_before=picker_closed)
