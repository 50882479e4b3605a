"""The Markdown widget of a message: Textual's, with code blocks that keep what a find
marks in them.

Textual draws a code block's text again whenever its style is worked out anew (the
message selected, the mouse over it, a new theme), which would wipe the marks of a find
(``find_marks``) off code as soon as the match was selected. ``MarkedFence`` draws them
again each time.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Label, Markdown
from textual.widgets.markdown import MarkdownFence


class MarkedFence(MarkdownFence):
    """A code block; ``marks`` (style, spans of its text) are drawn over its highlighting."""

    marks: tuple[str, tuple[tuple[int, int], ...]] | None = None

    def draw(self, content: Content) -> None:
        for label in self.query("#code-content").results(Label):
            label.update(content)

    def draw_marks(self) -> None:
        content = self._content
        if self.marks is not None:
            style, spans = self.marks
            for start, end in spans:
                content = content.stylize(style, start, end)
        self.draw(content)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.marks is not None:
            self.draw_marks()


class ChatMarkdown(Markdown):
    """Markdown whose code blocks are ``MarkedFence``s."""

    BLOCKS = {**Markdown.BLOCKS, "fence": MarkedFence, "code_block": MarkedFence}
