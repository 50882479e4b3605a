"""A reply's reasoning, folded to one line or shown dimmed above its answer.

Reasoning models write their thinking into the reply (``<think>`` blocks, gpt-oss's
analysis channel). The stored text stays exactly as generated; ``sessions.reasoning``
only says which spans are reasoning, and this widget shows them apart from the answer:
folded by default (a line with its length, so the answer is what catches the eye), or
whole and dimmed after the toggle key. While a reply streams, the folded line says the
model is still thinking.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from sessions.reasoning import ReplyView
from tui.safe_text import inert


def reasoning_line(view: ReplyView, key: str, *, stored: bool = False) -> str:
    """The folded form: what there is, and the key that unfolds it. A stored reply whose
    reasoning never closed (stopped, or cut at its length) is no longer thinking."""
    words = len(view.reasoning.split())
    state = ("reasoning, cut off" if stored else "thinking…") if view.thinking else "reasoning"
    return f"▸ {state} · {words:,} word{'s' if words != 1 else ''}" + (f" ({key} shows it)" if key else "")


class ReasoningView(Static):
    """The reasoning of one reply (hidden when the reply has none)."""

    DEFAULT_CSS = """
    ReasoningView { display: none; color: $text-muted; text-style: italic; height: auto; }
    ReasoningView.-present { display: block; }
    ReasoningView.-expanded { border-left: vkey $panel; padding-left: 1; }
    """

    def __init__(self) -> None:
        super().__init__("", classes="message-reasoning")
        self._view: ReplyView | None = None
        self._stored = False
        """The view is of a stored reply, not one being written."""
        self.expanded = False
        self.key = ""
        """The key that shows or folds reasoning, as the footer writes it."""

    def show_view(self, view: ReplyView, *, stored: bool = False) -> None:
        self._view, self._stored = view, stored
        self.set_class(bool(view.reasoning) or view.thinking, "-present")
        self._draw()

    def set_expanded(self, expanded: bool) -> None:
        if expanded != self.expanded:
            self.expanded = expanded
            self._draw()

    def _draw(self) -> None:
        view = self._view
        self.set_class(self.expanded, "-expanded")
        if view is None:
            self.update("")
        elif self.expanded:
            self.update(Text(inert(view.reasoning)))
        else:
            self.update(Text(reasoning_line(view, self.key, stored=self._stored)))
