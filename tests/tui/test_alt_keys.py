"""Alt+letter keys as a real terminal sends them: ESC and the letter, which Textual reads
as ``alt+<letter>`` *with* the letter as its character. Pilot's ``press("alt+f")`` has no
character, so it passed while, in a terminal, the message box took the letter as typing
and the key did nothing (seen in tmux: Alt+A wrote "a"). ESC f and ESC b are not Alt
keys at all for Textual (word right and left, as macOS's Option+F/B send), so none of the
app's keys may be ``alt+f`` or ``alt+b``."""

from __future__ import annotations

import pytest
from textual import events

from tests.tui.helpers import ready, settle, wait_for
from tui.bindings import KEYS


def alt_letter_keys() -> list[tuple[str, str]]:
    return [(spec.id, key) for spec in KEYS for key in spec.key.split(",")
            if key.startswith("alt+") and len(key) == len("alt+") + 1]


def test_the_alt_letter_keys_are_known():
    keys = {key for _, key in alt_letter_keys()}
    assert keys >= {"alt+a", "alt+s", "alt+g", "alt+i"} and not keys & {"alt+f", "alt+b"}


@pytest.mark.parametrize(("binding_id", "key"), alt_letter_keys())
async def test_an_alt_letter_from_a_terminal_runs_its_action_and_types_nothing(make_app, binding_id, key):
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        screen.chat_input.focus()
        ran: list[str] = []
        spec = next(s for s in KEYS if s.id == binding_id)
        method = "action_" + spec.action.split("(")[0]
        owner = app if spec.place == "app" else screen
        setattr(owner, method, lambda *args: ran.append(binding_id))
        app.post_message(events.Key(key, key[-1]))  # what the driver posts for ESC + letter
        await wait_for(pilot, lambda: ran == [binding_id], f"{key} to run {binding_id}")
        await settle(pilot)
        assert screen.chat_input.text == ""


@pytest.mark.parametrize(("binding_id", "key"), alt_letter_keys())
async def test_an_alt_letter_with_the_tree_focused_runs_its_action_and_types_nothing(make_app, binding_id, key):
    """Typing with a side panel focused goes to the message box; an Alt key is not typing."""
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await ready(pilot)
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: screen.tree_has_focus(), "the tree focused")
        ran: list[str] = []
        spec = next(s for s in KEYS if s.id == binding_id)
        method = "action_" + spec.action.split("(")[0]
        owner = app if spec.place == "app" else screen
        setattr(owner, method, lambda *args: ran.append(binding_id))
        app.post_message(events.Key(key, key[-1]))
        await wait_for(pilot, lambda: ran == [binding_id], f"{key} to run {binding_id}")
        await settle(pilot)
        assert screen.chat_input.text == ""
