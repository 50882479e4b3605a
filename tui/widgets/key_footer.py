"""The footer: the main keys, as many as fit whole, and the palette's key at the right.

Textual's ``Footer`` lays every key out in a row and lets the terminal's edge cut the row
wherever it falls: at 50 columns a key showed only its first character (a stray "^")
beside the palette's. This one keeps, in order, the keys that fit whole beside the
palette's key and leaves the others out (F1 lists them all), and lays them out again when
its width changes.
"""

from __future__ import annotations

from rich.cells import cell_len
from textual import events
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

KEY_GAP = 1
"""The compact footer's margin on the right of each key."""
PALETTE_EDGE = 1
"""The palette key's left border."""


def key_width(key: FooterKey) -> int:
    """Columns a compact key takes: its key, a space and its words, then its margin."""
    words = f" {key.description}" if key.description else ""
    return cell_len(key.key_display) + cell_len(words)


class KeyFooter(Footer):
    """A compact ``Footer`` that leaves out the keys it has no room for, rather than cutting one."""

    def __init__(self) -> None:
        super().__init__(compact=True)
        self._laid_out_for = 0

    def compose(self) -> ComposeResult:
        widgets: list[Widget] = list(super().compose())
        width = self.size.width
        if not width:
            yield from widgets
            return
        palette = [w for w in widgets if w.has_class("-command-palette")]
        room = width - sum(key_width(w) + PALETTE_EDGE for w in palette if isinstance(w, FooterKey))
        kept: list[Widget] = []
        for widget in widgets:
            if widget in palette:
                continue
            need = key_width(widget) + KEY_GAP if isinstance(widget, FooterKey) else widget.styles.width or 0
            if isinstance(need, int) and need <= room:
                room -= need
                kept.append(widget)
            else:
                break
        self.styles.grid_size_columns = len(kept) + len(palette)
        yield from kept
        yield from palette

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self._laid_out_for:
            self._laid_out_for = event.size.width
            self.call_after_refresh(self.recompose)

    @property
    def keys_shown(self) -> list[str]:
        """The descriptions of the keys shown, left to right (the palette's last)."""
        return [key.description for key in self.query(FooterKey)]
