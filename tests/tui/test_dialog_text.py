"""Every dialog's text is whole at 80 columns (and at 140), each dialog is centred over
the chat, and its focused button is the one Enter should press.

A dialog's title or question was a ``Label``, which does not wrap: at 140 columns the
Alt+G hint ended at "(Esc:" and the import title at "a llama". The test reads the
terminal as drawn: every word of each text in the dialog, in order, on its lines.
"""

from __future__ import annotations

import re

import pytest
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from tests.tui.helpers import ready, screen_text, send, settle, wait_for

BORDERS = re.compile(r"[│╭╮╰╯─▏▕▔▁▊▎┃]+")


def drawn_words(app, region) -> str:
    """The text the terminal shows inside ``region`` as one line of words, box drawing left out."""
    lines = [line[region.x:region.right] for line in screen_text(app)[region.y:region.bottom]]
    return " ".join(BORDERS.sub(" ", "\n".join(lines)).split())


def dialog_texts(screen: ModalScreen) -> list[str]:
    """The texts of the dialog's titles, questions and notes (not the boxes' own text)."""
    texts = []
    for widget in screen.query("#dialog-question, #picker-title, .settings-note, #attach-hint"):
        if isinstance(widget, (Label, Static)) and widget.display:
            texts.append(" ".join(str(widget.render()).split()))
    return texts


async def open_dialog(pilot, keys: tuple[str, ...]) -> ModalScreen:
    await pilot.press(*keys)
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ModalScreen), f"the dialog of {keys}")
    await pilot.pause()
    return pilot.app.screen


KEYS = {
    "continue from a place (Alt+G)": ("ctrl+up", "alt+g"),
    "several versions (Alt+R)": ("ctrl+up", "alt+r"),
    "import (Alt+I)": ("alt+i",),
    "attach (Alt+A)": ("alt+a",),
    "rename (F3)": ("f3",),
    "export (F4)": ("f4",),
    "delete a message (F8)": ("ctrl+up", "f8"),
    "delete the chat (Ctrl+Delete)": ("ctrl+delete",),
    "settings (Ctrl+S)": ("ctrl+s",),
}


@pytest.mark.parametrize("size", [(80, 24), (140, 42)], ids=["80x24", "140x42"])
@pytest.mark.parametrize("dialog", list(KEYS))
async def test_a_dialogs_text_is_whole_and_the_dialog_centred(make_app, script, dialog, size):
    script.replies = ["A reply long enough to go on from inside it, with a few more words."]
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await ready(pilot)
        await send(pilot, "Say hi.")
        await settle(pilot)
        modal = await open_dialog(pilot, KEYS[dialog])
        texts = dialog_texts(modal)
        assert texts, "the dialog has a text"
        box = modal.query_one("#dialog")
        words = drawn_words(app, box.region)
        for text in texts:
            assert text in words, f"cut: {text!r} not whole in {words!r}"
        left, right = box.region.x, size[0] - box.region.right
        assert abs(left - right) <= 1, f"not centred: {left} columns left of it, {right} right"


async def test_the_focused_button_of_a_question_is_the_one_enter_presses(make_app):
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "Say hi.")
        await open_dialog(pilot, ("ctrl+up", "f8"))
        assert isinstance(app.focused, Button) and str(app.focused.label) == "Delete"
