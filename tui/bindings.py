"""Every key of the app in one table: binding ids, default keys, descriptions.

The ids are the names users write in the ``[keys]`` table of ``config.toml``
(``regenerate = "f11"``); ``App.set_keymap`` swaps the key of every binding carrying
that id. Keeping the table here, rather than scattered over ``BINDINGS`` lists, is what
lets the help screen and the command palette list every action with its current key.

Defaults are chosen to work while the message input (a ``TextArea``) has focus: the
input keeps ctrl+left/right (word moves), ctrl+a/e/k/u/w/z/y, ctrl+x/c/v, f6 and f7, so
paging between versions uses alt+left/right and the message cursor ctrl+up/down (with
alt+up/down for terminals that do not send those). ``ctrl+j`` inserts a newline because
many terminals cannot send shift+enter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from textual.binding import Binding, BindingType

Place = Literal["input", "screen", "app", "tree"]


@dataclass(frozen=True)
class KeySpec:
    """One rebindable action."""

    id: str
    """The name used in ``[keys]``."""
    key: str
    """Default key(s), comma-separated."""
    action: str
    """Textual action run on the node given by ``place``."""
    description: str
    footer: bool = False
    """Shown in the footer (everything is shown in the help screen)."""
    place: Place = "screen"
    priority: bool = False

    def binding(self) -> Binding:
        return Binding(
            self.key, self.action, self.description, show=self.footer, priority=self.priority, id=self.id
        )


KEYS: tuple[KeySpec, ...] = (
    KeySpec("send", "enter", "submit", "Send", footer=True, place="input", priority=True),
    KeySpec("newline", "shift+enter,ctrl+j", "newline", "New line", place="input", priority=True),
    KeySpec("stop", "escape", "stop", "Stop", footer=True),
    KeySpec("message-previous", "ctrl+up,alt+up", "select_message(-1)", "Previous message"),
    KeySpec("message-next", "ctrl+down,alt+down", "select_message(1)", "Next message"),
    KeySpec("sibling-previous", "alt+left", "sibling(-1)", "Previous version ‹"),
    KeySpec("sibling-next", "alt+right", "sibling(1)", "Next version ›"),
    KeySpec("edit", "f2", "edit", "Edit", footer=True),
    KeySpec("regenerate", "ctrl+r", "regenerate", "Regenerate", footer=True),
    KeySpec("regenerate-several", "alt+r", "regenerate_several", "Regenerate ×N: several new versions"),
    KeySpec("fork", "ctrl+f", "fork", "Fork here"),
    KeySpec("rewind", "ctrl+b", "rewind", "Rewind here"),
    KeySpec("delete-branch", "f8", "delete_branch", "Delete branch"),
    KeySpec("continue-reply", "ctrl+g", "continue_reply", "Continue the reply"),
    KeySpec("continue-from", "alt+g", "continue_from", "Continue the reply from a place in it"),
    KeySpec("attach-file", "alt+a", "attach_file", "Attach a text file to the message"),
    KeySpec("toggle-reasoning", "f12", "toggle_reasoning", "Show or fold reasoning"),
    KeySpec("find", "alt+s", "find", "Find in the chat"),
    KeySpec("toggle-tree", "ctrl+t", "toggle_tree", "Tree", footer=True),
    KeySpec("tree-wider", "greater_than_sign", "width(4)", "Widen the tree panel (or drag its edge)", place="tree"),
    KeySpec("tree-narrower", "less_than_sign", "width(-4)", "Narrow the tree panel", place="tree"),
    KeySpec("toggle-sessions", "ctrl+l", "toggle_sessions", "Sessions"),
    KeySpec("new-session", "ctrl+n", "new_session", "New chat"),
    KeySpec("open-session", "ctrl+o", "open_session", "Open chat"),
    KeySpec("rename-session", "f3", "rename_session", "Rename chat"),
    KeySpec("chat-settings", "ctrl+s", "chat_settings", "Chat settings (system prompt, sampling)"),
    KeySpec("delete-session", "ctrl+delete", "delete_session", "Delete chat"),
    KeySpec("undo-delete", "ctrl+z", "undo_delete", "Bring back what was deleted"),
    KeySpec("import-sessions", "alt+i", "import_sessions", "Import chats from a file"),
    KeySpec("export", "f4", "export", "Export chat"),
    KeySpec("switch-model", "f5", "switch_model", "Switch model"),
    KeySpec("copy-message", "f9", "copy_message", "Copy message"),
    KeySpec("copy-code", "f10", "copy_code", "Copy code block"),
    KeySpec("help", "f1", "help", "Help", footer=True, place="app"),
    KeySpec("quit", "ctrl+q", "quit", "Quit", footer=True, place="app", priority=True),
)

PALETTE = KeySpec("command-palette", "ctrl+p", "command_palette", "Command palette", place="app")
"""Bound by Textual itself (``App.COMMAND_PALETTE_BINDING``); rebindable all the same."""

ALL_IDS = frozenset(spec.id for spec in (*KEYS, PALETTE))


def bindings_for(place: Place) -> list[BindingType]:
    """The ``BINDINGS`` list of the node that owns ``place``."""
    return [spec.binding() for spec in KEYS if spec.place == place]


def spec(binding_id: str) -> KeySpec:
    for candidate in (*KEYS, PALETTE):
        if candidate.id == binding_id:
            return candidate
    raise KeyError(binding_id)


def check_overrides(keys: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Split the ``[keys]`` table into a usable keymap and plain-words problems."""
    keymap: dict[str, str] = {}
    problems: list[str] = []
    for binding_id, key in keys.items():
        if binding_id not in ALL_IDS:
            problems.append(
                f"[keys] {binding_id}: there is no action with that name "
                f"(the names are listed in the help screen, F1)"
            )
        elif not isinstance(key, str) or not key.strip() or any(not part.strip() for part in key.split(",")):
            problems.append(f"[keys] {binding_id}: {key!r} is not a key (write e.g. \"ctrl+g\")")
        else:
            keymap[binding_id] = ",".join(part.strip() for part in key.split(","))
    problems.extend(_clashes(keymap))
    return keymap, problems


def _clashes(keymap: Mapping[str, str]) -> list[str]:
    """Two actions of the same place on one key: only one of them could ever run."""
    owners: dict[tuple[str, str], str] = {}
    problems = []
    for item in (*KEYS, PALETTE):
        place = "screen" if item.place == "app" else item.place
        for key in current_key(item, keymap).split(","):
            other = owners.setdefault((place, key), item.id)
            if other != item.id:
                problems.append(f"[keys] {item.id} and {other} both use {key}; only one of them will work")
    return problems


def current_key(item: KeySpec, keymap: Mapping[str, str]) -> str:
    """The key(s) ``item`` answers to once ``keymap`` is applied."""
    return keymap.get(item.id, item.key)
