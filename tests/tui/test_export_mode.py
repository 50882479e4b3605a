"""The app's export dialog writes a private file (0600), even over a file others could
read: the export holds the whole chat."""

from __future__ import annotations

from textual.widgets import Input

from tests.tui.helpers import ready, send, wait_for
from tui.screens.dialogs import ExportScreen


async def test_an_export_over_a_readable_file_is_private(make_app, tmp_path):
    target = tmp_path / "exports" / "chat.md"
    target.parent.mkdir()
    target.write_text("an older export, readable by everyone\n" * 50)
    target.chmod(0o644)
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await send(pilot, "something private")
        await pilot.press("f4")
        await wait_for(pilot, lambda: isinstance(app.screen, ExportScreen), "the export dialog")
        path_box = app.screen.query_one("#export-path", Input)
        path_box.value = str(target)
        path_box.focus()
        await pilot.press("enter")  # it exists: the dialog asks to press again
        await wait_for(pilot, lambda: "already exists" in str(app.screen.query_one("#dialog-error").render()),
                       "the question about the existing file")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, ExportScreen), "the export to finish")
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    text = target.read_text()
    assert "something private" in text and "an older export" not in text
    assert sorted(p.name for p in target.parent.iterdir()) == ["chat.md"]


async def test_with_json_chosen_a_typed_file_name_survives_tab_and_is_the_file_written(make_app, tmp_path):
    """JSON chosen, then Tab to the path, a name typed, Tab to Export and Enter: the file
    written is the one typed (a user found the name dropped; the keys are the ones used)."""
    target = tmp_path / "pets.json"
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await send(pilot, "something to keep")
        await pilot.press("f4")
        await wait_for(pilot, lambda: isinstance(app.screen, ExportScreen), "the export dialog")
        await pilot.click("#format-json")
        await wait_for(pilot, lambda: app.screen.kind == "json", "JSON chosen")
        await pilot.press("tab")
        assert app.focused is app.screen.query_one("#export-path", Input)
        await pilot.press(*str(target))  # Tab selected the path's text: typing replaces it
        await pilot.press("tab")
        assert app.screen.query_one("#export-path", Input).value == str(target)
        await pilot.press("enter")  # on Export
        await wait_for(pilot, lambda: not isinstance(app.screen, ExportScreen), "the export to finish")
    assert '"something to keep"' in target.read_text()
