"""Attaching a text file to the message from a key and from the command palette.

The file's fenced block joins the end of the draft, where it can be read before sending,
and the status bar says how many tokens it adds; a file that cannot be attached is one
notification and the draft stays as it was.
"""

from __future__ import annotations

import pytest
from textual.command import CommandList, CommandPalette
from textual.widgets import Input

from tests.tui.helpers import ready, settle, shown_texts, type_text, wait_for
from tui.screens.attach_picker import AttachPicker


async def _attach(pilot, path, key: str = "alt+a") -> None:
    await pilot.press(key)
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, AttachPicker), "the file picker")
    pilot.app.screen.query_one(Input).value = str(path)
    await pilot.press("enter")


async def test_the_file_joins_the_draft_with_its_tokens_shown_and_is_sent_with_it(make_app, tmp_path):
    (tmp_path / "notes.txt").write_text("Llamas hum.\n")
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        screen.chat_input.focus()
        await type_text(pilot, "Read this")
        await _attach(pilot, tmp_path / "notes.txt")
        block = "```notes.txt\nLlamas hum.\n```"
        await wait_for(pilot, lambda: screen.chat_input.text == f"Read this\n\n{block}\n\n", "the block in the draft")
        # The fake engine's tokens are the text's UTF-8 bytes.
        tokens = len(block.encode())
        assert screen.status.text_of("note") == f"Attached notes.txt: {tokens} tokens of a 4,096-token context"
        assert screen.chat_input.has_focus  # the draft goes on being written
        await pilot.press("enter")
        await settle(pilot)
        assert shown_texts(screen)[0] == ("user", f"Read this\n\n{block}")


async def test_a_binary_file_is_one_notification_and_the_draft_stays(make_app, tmp_path):
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8\xff\xe0\0\x10JFIF")
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        screen.chat_input.focus()
        await type_text(pilot, "draft")
        await _attach(pilot, tmp_path / "photo.jpg")
        await wait_for(pilot, lambda: any("photo.jpg" in n.message for n in app._notifications), "the refusal")
        (note,) = [n for n in app._notifications if "photo.jpg" in n.message]
        assert note.message == "Cannot attach photo.jpg: it holds NUL bytes, so it is not text."
        assert note.severity == "error"
        assert screen.chat_input.text == "draft"


async def test_the_palette_attaches_a_file_too(make_app, tmp_path):
    (tmp_path / "todo.md").write_text("- [ ] shear\n")
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await type_text(pilot, "attach")
        await wait_for(pilot, lambda: app.screen.query_one(CommandList).option_count > 0, "a palette hit")
        assert "Attach a text file" in str(app.screen.query_one(CommandList).get_option_at_index(0).prompt)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, AttachPicker), "the file picker")
        app.screen.query_one(Input).value = str(tmp_path / "todo.md")
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.chat_input.text == "```todo.md\n- [ ] shear\n```\n\n", "the block")


async def test_what_is_typed_after_attaching_to_an_empty_message_follows_the_block(make_app, tmp_path):
    """The walk-through's steps: Alt+A on an empty input, then the question."""
    (tmp_path / "notes.txt").write_text("Llamas hum.\n")
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        screen.chat_input.focus()
        await _attach(pilot, tmp_path / "notes.txt")
        await wait_for(pilot, lambda: "Llamas hum." in screen.chat_input.text, "the block in the draft")
        await type_text(pilot, "What is in the file?")
        await pilot.press("enter")
        await settle(pilot)
        assert shown_texts(screen)[0] == ("user", "```notes.txt\nLlamas hum.\n```\n\nWhat is in the file?")


def picker_of(pilot) -> AttachPicker:
    screen = pilot.app.screen
    assert isinstance(screen, AttachPicker)
    return screen


def listed(picker: AttachPicker) -> list[str]:
    return [str(node.data.path.name) for node in picker.files.root.children if node.data is not None]


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "docs"
    (folder / "other").mkdir(parents=True)
    for name in ("notes.txt", "numbers.csv", "Novel.md", ".hidden"):
        (folder / name).write_text(f"the text of {name}\n")
    return folder


async def test_tab_completes_the_path_typed(make_app, folder):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot)
        await pilot.press("alt+a")
        await wait_for(pilot, lambda: isinstance(app.screen, AttachPicker), "the file picker")
        picker = picker_of(pilot)
        box = picker.query_one(Input)
        box.value = f"{folder}/no"
        await pilot.press("tab")
        await wait_for(pilot, lambda: box.value == f"{folder}/notes.txt", "the only name left, whole")
        box.value = f"{folder}/ot"
        await pilot.press("tab")
        await wait_for(pilot, lambda: box.value == f"{folder}/other/", "a folder, with its slash")
        box.value = f"{folder}/n"
        await pilot.press("tab")  # notes.txt, numbers.csv: nothing more in common
        await pilot.pause()
        box.value = f"{folder}/zz"
        await pilot.press("tab")
        await wait_for(pilot, lambda: "Nothing in" in str(picker.query_one("#dialog-error").render()), "the refusal")
        assert box.value == f"{folder}/zz" and box.has_focus


async def test_the_list_is_filtered_by_the_name_typed_and_a_file_chosen_in_it_is_attached(make_app, folder):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await pilot.press("alt+a")
        await wait_for(pilot, lambda: isinstance(app.screen, AttachPicker), "the file picker")
        picker = picker_of(pilot)
        picker.query_one(Input).value = f"{folder}/"
        await wait_for(pilot, lambda: sorted(listed(picker)) == ["Novel.md", "notes.txt", "numbers.csv", "other"],
                       "the folder listed, without its dot file")
        await pilot.press("end")
        await type_text(pilot, "NO")
        await wait_for(pilot, lambda: sorted(listed(picker)) == ["Novel.md", "notes.txt"], "the list filtered")
        await pilot.press("down")  # into the list
        assert picker.files.has_focus
        while picker.files.cursor_node is None or picker.files.cursor_node.data.path.name != "notes.txt":
            await pilot.press("down")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "the text of notes.txt" in screen.chat_input.text, "the file attached")


async def test_a_home_folder_that_is_not_there_leaves_the_picker_open(make_app, tmp_path, monkeypatch):
    """Seen in the tmux walk-through: with no home folder, Alt+A closed its picker at once and
    said the folder could not be attached (Textual's tree takes a missing folder for a file)."""
    monkeypatch.setenv("HOME", str(tmp_path / "nobody"))
    app = make_app()
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await ready(pilot)
        await pilot.press("alt+a")
        await wait_for(pilot, lambda: isinstance(app.screen, AttachPicker), "the file picker")
        files = picker_of(pilot).files  # the folder's tree runs a loader for as long as it is open: no settle
        await wait_for(pilot, lambda: files.root.data is not None and files.root.data.loaded, "the folder looked at")
        for _ in range(5):  # what the tree posts on the way (its root taken for a file) is handled
            await pilot.pause()
        assert isinstance(app.screen, AttachPicker)
        assert not [n for n in app._notifications if "Cannot attach" in n.message]
