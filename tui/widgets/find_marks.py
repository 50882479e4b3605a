"""What a find marks in the messages on screen: the messages holding the text, the one the
find is at, and each match in their drawn text.

The core says where a match is in a message's stored text (``FindHit.spans``); the view
draws that text as Markdown, where markup is gone and lines are joined or broken, so those
offsets do not point into what is drawn. The text drawn is searched again here, the same
way (case ignored), block by block. Only the drawing changes: each block keeps its own
content (``_content``, which Textual's Markdown re-renders from), so unmarking draws it
again as it was. Code blocks draw their marks again by themselves (``chat_document``).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.widgets.markdown import MarkdownBlock

from tui.widgets.chat_document import MarkedFence
from tui.widgets.message_view import MessageView

MATCH_STYLE = "reverse"
CURRENT_STYLE = "bold reverse $accent"
MARKED = "-find-marked"
"""Class of a block drawn with marks (the ones to draw again when the marks go)."""


@dataclass(frozen=True)
class FindMarks:
    """What to mark: the text looked for, the messages holding it, the one the find is at."""

    query: str
    found: frozenset[int]
    current: int | None = None


def drawn_spans(plain: str, query: str) -> list[tuple[int, int]]:
    """Where ``query`` is in ``plain``, case ignored (where folding keeps lengths; a text
    whose folding changes its length, ``ß``, is matched as it is written)."""
    folded, needle = plain.casefold(), query.casefold()
    if len(folded) != len(plain) or not needle:
        folded, needle = plain.lower(), query.lower()
        if len(folded) != len(plain) or not needle:
            return []
    spans, at = [], folded.find(needle)
    while at >= 0:
        spans.append((at, at + len(needle)))
        at = folded.find(needle, at + len(needle))
    return spans


def _draw(block: MarkdownBlock, style: str, spans: list[tuple[int, int]]) -> None:
    """Draw ``block`` with ``spans`` of its text in ``style`` (none: as it is)."""
    if isinstance(block, MarkedFence):  # a code block keeps its marks through a restyle
        block.marks = (style, tuple(spans)) if spans else None
        block.draw_marks()
        return
    content = block._content
    for start, end in spans:
        content = content.stylize(style, start, end)
    block.update(content)


def mark(view: MessageView, marks: FindMarks | None) -> None:
    """Mark ``view`` as ``marks`` say (None: no find open), its matches drawn reversed."""
    found = marks is not None and view.message_id in marks.found
    current = found and marks is not None and view.message_id == marks.current
    view.set_class(found, "-found")
    view.set_class(current, "-found-current")
    for block in view.query(f"Markdown .{MARKED}").results(MarkdownBlock):
        block.remove_class(MARKED)
        _draw(block, MATCH_STYLE, [])
    if not found or marks is None:
        return
    style = CURRENT_STYLE if current else MATCH_STYLE
    for block in view.query("Markdown MarkdownBlock").results(MarkdownBlock):
        spans = drawn_spans(block._content.plain, marks.query)
        if spans:
            block.add_class(MARKED)
            _draw(block, style, spans)
