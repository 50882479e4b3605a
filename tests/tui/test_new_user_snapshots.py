"""Snapshots of the screens issue 48 added or changed: the model picker with typed text, the
attachment picker, a widened tree (the switch's progress and the settings dialog with a
preset are with their features: ``test_switch_progress``, ``test_sampling_presets``)."""

from __future__ import annotations

from tests.tui.helpers import settle, type_text, wait_for
from tests.tui.test_main_snapshots import SIZE, quiet, write_chat
from tui.screens.attach_picker import AttachPicker
from tui.screens.model_picker import DEMO_KEY, ModelPicker
from tui.startup import StartupRequest


def test_the_model_picker_with_typed_text(snap_compare, make_app, fake_model, tmp_path, monkeypatch):
    for variable in ("HOME", "HF_HOME", "XDG_CACHE_HOME", "HF_HUB_CACHE", "LLAMA_CACHE"):
        monkeypatch.setenv(variable, str(tmp_path / "elsewhere"))  # no model this machine happens to hold
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def typed(pilot):
        await quiet(pilot)
        await pilot.press("f5")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ModelPicker), "the model picker")
        await wait_for(pilot, lambda: pilot.app.screen.discovered, "the models found")
        await type_text(pilot, "demo")
        await wait_for(pilot, lambda: pilot.app.screen.shown_keys == [DEMO_KEY], "the rows filtered")
        pilot.app.screen.query_one("#model-path").cursor_blink = False

    assert snap_compare(app, terminal_size=SIZE, run_before=typed)


def test_the_attachment_picker(snap_compare, make_app, fake_model, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    for name in ("notes.txt", "numbers.csv", "novel.md", "plan.md"):
        (home / name).write_text(name)
    monkeypatch.setenv("HOME", str(home))
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def picked(pilot):
        await quiet(pilot)
        await pilot.press("alt+a")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, AttachPicker), "the file picker")
        picker = pilot.app.screen
        await type_text(pilot, "no")
        await wait_for(pilot, lambda: sorted(node.data.path.name for node in picker.files.root.children)
                       == ["notes", "notes.txt", "novel.md"], "the folder filtered")
        picker.query_one("#attach-path").cursor_blink = False

    assert snap_compare(app, terminal_size=SIZE, run_before=picked)


def test_a_widened_tree(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def widened(pilot):
        await quiet(pilot)
        screen = pilot.app.screen
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: screen.tree_has_focus(), "the tree")
        before = screen.tree_panel.outer_size.width
        await pilot.press("greater_than_sign", "greater_than_sign", "greater_than_sign")
        await wait_for(pilot, lambda: screen.tree_panel.outer_size.width == before + 12, "the tree wider")
        await settle(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=widened)
