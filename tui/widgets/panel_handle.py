"""The tree panel's left edge, which the mouse drags to widen or narrow the panel.

A column of ``▏`` where the panel's border was: pressed, it takes the mouse, and every move
says how wide the panel would be with its edge under the pointer (``Dragged``); letting go
says it once more with ``done``, and the screen remembers that width.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from textual import events
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget


class PanelHandle(Widget):
    """A one-column edge to drag; the panel it belongs to is its parent, on the right of the screen."""

    DEFAULT_CSS = """
    PanelHandle { dock: left; width: 1; height: 100%; color: $panel; }
    PanelHandle:hover, PanelHandle.-dragging { color: $accent; }
    """

    @dataclass
    class Dragged(Message):
        """The panel's edge moved: ``columns`` from the pointer to the panel's right end."""

        columns: int
        done: bool = False
        """The button was let go: the width to keep."""

    def render_line(self, y: int) -> Strip:
        return Strip([Segment("▏", self.rich_style)], 1)

    def _columns(self, event: events.MouseEvent) -> int:
        parent = self.parent
        right = parent.region.right if isinstance(parent, Widget) else self.screen.size.width
        return right - int(event.screen_x)

    def on_mouse_down(self, event: events.MouseDown) -> None:
        event.stop()
        self.capture_mouse()
        self.add_class("-dragging")

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self.app.mouse_captured is self:
            event.stop()
            self.post_message(self.Dragged(self._columns(event)))

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self.app.mouse_captured is self:
            event.stop()
            self.release_mouse()
            self.remove_class("-dragging")
            self.post_message(self.Dragged(self._columns(event), done=True))
