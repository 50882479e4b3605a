"""Snapshots of a file attached to the message being written: its block in the message box
with the tokens it adds in the status bar, and a file refused in one sentence.
(The file picker itself is ``test_new_user_snapshots.test_the_attachment_picker``.)

The files live in a private home (``~/`` is where the picker starts); the chat is
``test_main_snapshots``', at its size.
"""

from __future__ import annotations

from tests.tui.helpers import type_text, wait_for
from tests.tui.test_delete_snapshots import toast_shown
from tests.tui.test_main_snapshots import SIZE, quiet, write_chat
from tui.screens.attach_picker import AttachPicker
from tui.startup import StartupRequest

NOTES = "Llamas hum when they are calm.\nAlpacas are smaller, and kept for their wool.\n"


async def attach(pilot, name: str) -> None:
    """Write a line, then attach the file ``name`` of the home folder (typed in the picker)."""
    await quiet(pilot)
    await type_text(pilot, "Summarise these notes")
    await pilot.press("alt+a")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, AttachPicker), "the file picker")
    await type_text(pilot, name)
    await pilot.press("enter")


def test_an_attached_file_in_the_message_box(snap_compare, make_app, fake_model, tmp_path, monkeypatch):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "notes.txt").write_text(NOTES)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def attached(pilot):
        await attach(pilot, "notes.txt")
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.status.text_of("note").startswith("Attached notes.txt: "),
                       "the file attached")

    assert snap_compare(app, terminal_size=SIZE, run_before=attached)


def test_a_file_that_is_not_text_is_refused(snap_compare, make_app, fake_model, tmp_path, monkeypatch):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0\0\x10JFIF")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model)))

    async def refused(pilot):
        await attach(pilot, "photo.jpg")
        await toast_shown(pilot, "Cannot attach photo.jpg")

    assert snap_compare(app, terminal_size=SIZE, run_before=refused)
