"""The footer: the main keys, as many as fit whole, and the palette's key at the right.

Textual's ``Footer`` lays every key out in a row and lets the terminal's edge cut the row
wherever it falls: at 50 columns a key showed only its first character (a stray "^")
beside the palette's. This one keeps, in order, the keys that fit whole beside the
palette's key and hides the others (F1 lists them all), again whenever its width changes.
Hiding rather than composing anew: a second resize while a recompose was under way left
the keys of the first size (seen in tmux, 140 to 80 to 50 columns).
"""

from __future__ import annotations

from typing import Any

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

KEY_GAP = 1
"""The compact footer's margin on the right of each key."""
PALETTE_EDGE = 1
"""The palette key's left border."""


def key_width(key: FooterKey) -> int:
    """Columns a compact key takes: its key, a space and its words."""
    words = f" {key.description}" if key.description else ""
    return cell_len(key.key_display) + cell_len(words)


class KeyFooter(Footer):
    """A compact ``Footer`` that hides the keys it has no room for, rather than cutting one."""

    def __init__(self) -> None:
        super().__init__(compact=True)
        self._composed_for: list[Any] | None = None
        """The keys the footer was last composed with (``_keys_of``)."""

    def compose(self) -> ComposeResult:
        if self._bindings_ready:
            self._composed_for = self._keys_of(self.screen)
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                # Its compact class given now, not by its ``compact`` watcher once it is
                # mounted, which would style the key a second time.
                widget.set_class(self.compact, "-compact", update=False)
            yield widget
        self.call_after_refresh(self.fit_keys)

    def bindings_changed(self, screen: Screen) -> None:
        """Compose the keys again only when they are other keys. Textual's footer does at
        every change of the screen's bindings, which every move of the focus is, and each
        key it makes anew is styled twice: most moves leave the same keys."""
        if (self._composed_for is not None and self.is_attached and screen is self.screen
                and self._keys_of(screen) == self._composed_for):
            return
        super().bindings_changed(screen)

    def _keys_of(self, screen: Screen) -> list[Any]:
        """What ``Footer.compose`` draws from: each binding shown, whether it is enabled and
        its tooltip, and the palette's binding."""
        palette = self.app.COMMAND_PALETTE_BINDING
        return [(key, binding, enabled, tooltip)
                for key, (_, binding, enabled, tooltip) in screen.active_bindings.items()
                if binding.show or key == palette]

    def on_resize(self) -> None:
        self.fit_keys()

    def fit_keys(self) -> None:
        """Show, in order, the keys that fit whole beside the palette's; hide the rest."""
        keys = list(self.query(FooterKey))
        width = self.size.width
        if not width:
            return
        palette = [key for key in keys if key.has_class("-command-palette")]
        room = width - sum(key_width(key) + PALETTE_EDGE for key in palette)
        fits = True
        for key in keys:
            if key in palette:
                continue
            fits = fits and key_width(key) + KEY_GAP <= room
            if fits:
                room -= key_width(key) + KEY_GAP
            key.display = fits

    @property
    def keys_shown(self) -> list[str]:
        """The descriptions of the keys shown, left to right (the palette's last)."""
        return [key.description for key in self.query(FooterKey) if key.display]
