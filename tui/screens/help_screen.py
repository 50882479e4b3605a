"""Every key of the app with its current binding, description and ``[keys]`` name.

Built from ``tui.bindings`` and the keymap in effect, so a key rebound in the config file
shows its new binding here and the names to use in ``[keys]`` are always at hand.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tui.bindings import KEYS, PALETTE, current_key
from tui.safe_text import inert
from tui.widgets.message_tree import COLD_MARK, DISK_MARK, HEAD_MARK, RUN_LINE, SAVED_MARK

INTRO = ("Keys work while you type; Esc also stops a reply or cancels an edit. Rebind any key in "
         "the [keys] table of config.toml, e.g. regenerate = \"f11\". Every action is also in "
         "the command palette.")

TREE_LEGEND = (f"In the tree panel: {SAVED_MARK} the state after a message is in RAM, {DISK_MARK} on disk, "
               f"{COLD_MARK} saved nowhere (going there decodes it); {HEAD_MARK} the head; {RUN_LINE} a run of "
               "messages, ├─ └─ alternatives with ‹i/n›; heavy and bold: the branch shown. A click shows what "
               "going to a message costs, Enter or a second click goes there; ⋯ builds more of a long run, "
               "or goes up a branch that forks many times.")


def key_rows(keymap: Mapping[str, str], display) -> list[tuple[str, str, str]]:
    """(keys as shown, description, id) for every action, in the order of the table."""
    rows = []
    for spec in (*KEYS, PALETTE):
        keys = current_key(spec, keymap).split(",")
        shown = " / ".join(display(Binding(key.strip(), spec.action)) for key in keys)
        rows.append((inert(shown), spec.description, spec.id))
    return rows


class HelpScreen(ModalScreen[None]):
    """The key list (F1); Esc, F1 or q closes it."""

    CSS_PATH = "help_screen.tcss"
    BINDINGS = [
        Binding("escape,f1,q", "dismiss", "Close", id="help.close"),
    ]

    def __init__(self, keymap: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.keymap = dict(keymap or {})

    def compose(self) -> ComposeResult:
        with Vertical() as box:
            box.border_title = "Keys"
            yield Static(Text(INTRO), id="help-intro")
            table: DataTable[Text] = DataTable(cursor_type="row", zebra_stripes=True)
            table.add_columns(Text("Key"), Text("Action"), Text("Name in [keys]"))
            for shown, description, binding_id in key_rows(self.keymap, self.app.get_key_display):
                table.add_row(Text(shown), Text(description), Text(binding_id))
            yield table
            yield Static(Text(TREE_LEGEND), id="help-tree")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)

