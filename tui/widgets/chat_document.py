"""The Markdown widget of a message: Textual's, with code blocks that keep what a find
marks in them, and a long reply's settled blocks out of the layout while it streams.

Textual draws a code block's text again whenever its style is worked out anew (the
message selected, the mouse over it, a new theme), which would wipe the marks of a find
(``find_marks``) off code as soon as the match was selected. ``MarkedFence`` draws them
again each time.

Every update of a reply being written lays the whole screen out again, and Textual's
layout visits every widget shown, each block of the reply among them: a long reply made
each update cost more than the one before. While the view follows the end of the reply,
only its last screens can be seen, so ``fold_settled`` takes the blocks above them out of
the layout (``display: none``) and puts a top padding of exactly their rows in their
place: the blocks shown, the reply's height and the scroll bar stay as they were, and the
layout visits a few screens of blocks whatever the reply's length. ``unfold`` brings them
back before anything could show them (a scroll away from the end, a new width, the stored
reply replacing the streamed one). Only the last block ever changes while a reply streams
(``Markdown.append``), so the blocks folded are settled.
"""

from __future__ import annotations

from typing import Any

from textual.await_complete import AwaitComplete
from textual.content import Content
from textual.widgets import Label, Markdown
from textual.widgets.markdown import MarkdownBlock, MarkdownFence


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
    """Markdown whose code blocks are ``MarkedFence``s, and whose settled blocks can leave the
    layout while a reply streams (``fold_settled``)."""

    BLOCKS = {**Markdown.BLOCKS, "fence": MarkedFence, "code_block": MarkedFence}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.folded = 0
        """Blocks at the start taken out of the layout (``fold_settled``)."""
        self._fold_width = 0
        """The width the folded blocks were laid out at: their rows hold at that width only."""

    def update(self, markdown: str) -> AwaitComplete:
        """Show ``markdown`` instead, every block back in the layout first (the new blocks
        replace them in place)."""
        self.unfold()
        return super().update(markdown)

    def _blocks(self) -> list[MarkdownBlock]:
        return [child for child in self.children if isinstance(child, MarkdownBlock)]

    async def fold_settled(self, keep_rows: int) -> int:
        """Take the blocks that end more than ``keep_rows`` rows above the end of the document
        out of the layout, the last block always kept; returns how many are folded now.

        Rows come from the last layout, which laid every block out at the width it had then: a
        block not laid out yet (mounted since) ends the blocks considered. At another width
        than the folded blocks were laid out at, they come back instead (their rows no
        longer hold).
        """
        async with self.lock:  # not while ``append`` changes the blocks
            width = self.size.width
            if self.folded and width != self._fold_width:
                self.unfold()
                return 0
            blocks = self._blocks()[self.folded:]
            tops: list[int] = []
            y = self.styles.padding.top + (blocks[0].styles.margin.top if blocks else 0)
            for block, after in zip(blocks, blocks[1:], strict=False):
                if not block.outer_size.height:
                    break  # mounted since the last layout
                tops.append(y)
                y += block.outer_size.height + max(block.styles.margin.bottom, after.styles.margin.top)
            # ``y``: where the first block not measured starts, a row the end is below
            fold = sum(1 for top in tops[1:] if top <= y - keep_rows)
            if fold:
                first_kept = blocks[fold]
                for block in blocks[:fold]:
                    block.display = False
                self.styles.padding = (tops[fold] - first_kept.styles.margin.top, 0, 0, 0)
                self.folded += fold
                self._fold_width = width
            return self.folded

    def unfold(self) -> None:
        """Bring every folded block back into the layout, in place of the padding."""
        if not self.folded:
            return
        for block in self._blocks()[:self.folded]:
            block.display = True
        self.styles.clear_rule("padding")
        self.folded = 0
