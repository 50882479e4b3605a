"""The key table: unique ids, every action implemented, overrides checked in plain words."""

from __future__ import annotations

from tui.app import LlamaChatApp
from tui.bindings import ALL_IDS, KEYS, PALETTE, bindings_for, check_overrides, current_key
from tui.bindings import spec as key_spec
from tui.screens.chat_screen import ChatScreen
from tui.widgets.chat_input import ChatInput
from tui.widgets.tree_panel import TreePanel

OWNERS = {"screen": ChatScreen, "app": LlamaChatApp, "input": ChatInput, "tree": TreePanel}


def test_ids_are_unique():
    ids = [spec.id for spec in (*KEYS, PALETTE)]
    assert len(ids) == len(set(ids)) == len(ALL_IDS)


def test_every_action_is_implemented_where_it_is_bound():
    for spec in KEYS:
        name = "action_" + spec.action.split("(")[0]
        assert hasattr(OWNERS[spec.place], name), f"{spec.id}: {OWNERS[spec.place].__name__} has no {name}"


def test_default_keys_do_not_clash():
    assert check_overrides({}) == ({}, [])


def test_the_input_keeps_its_editing_keys():
    """Screen keys must not shadow what the TextArea needs while typing."""
    editing = {"ctrl+left", "ctrl+right", "ctrl+a", "ctrl+e", "ctrl+k", "ctrl+u", "ctrl+w",
               "ctrl+y", "ctrl+x", "ctrl+c", "ctrl+v", "f6", "f7", "up", "down", "left", "right"}
    for spec in KEYS:
        assert not set(spec.key.split(",")) & editing, spec.id
    # Ctrl+Z is shared: the input undoes typing first and passes it on with none left
    # (``ChatInput.action_undo``), so the screen's binding must not take it first.
    undo = key_spec("undo-delete")
    assert undo.key == "ctrl+z" and not undo.priority and undo.place == "screen"


def test_bindings_carry_ids_and_send_is_a_priority_key_of_the_input():
    send = next(b for b in bindings_for("input") if b.id == "send")
    assert send.key == "enter" and send.priority
    assert all(b.id for place in ("input", "screen", "app") for b in bindings_for(place))


def test_overrides_are_checked():
    keymap, problems = check_overrides({"regenerate": "ctrl+g", "regenrate": "ctrl+h", "rewind": " "})
    assert keymap == {"regenerate": "ctrl+g"}
    assert any("regenrate" in p and "no action" in p for p in problems)
    assert any("rewind" in p and "not a key" in p for p in problems)


def test_a_clash_is_reported():
    keymap, problems = check_overrides({"regenerate": "ctrl+t"})  # ctrl+t toggles the tree
    assert keymap == {"regenerate": "ctrl+t"}
    assert problems and "regenerate" in problems[0] and "toggle-tree" in problems[0]


def test_current_key_follows_the_keymap():
    spec = next(s for s in KEYS if s.id == "edit")
    assert current_key(spec, {}) == "f2"
    assert current_key(spec, {"edit": "ctrl+g"}) == "ctrl+g"
