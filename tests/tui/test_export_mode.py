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
