"""How one line of the conversation tree is drawn: runs, forks, and the marks on a message.

A *run* (messages that follow each other with no alternative between them) is drawn as
one vertical line, ``│``, with no new indent per message; a *fork* keeps the tree's own
branch guides, ``├─`` and ``└─``, and every alternative says which of how many it is
(``‹2/4›``) while the message it forks from says how many there are ("4 replies"). The
branch on screen is drawn heavy in ``$tree-active`` (``┃``, ``┣━``) and bold.

Before each message a mark says where the model state after it is kept: ``●`` in RAM,
``◐`` on disk (both in ``$saved-mark``: going there restores rather than decodes), ``○``
nowhere (going there decodes the branch from the last saved point); no mark while it is
not known yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.strip import Strip
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from sessions.api.chat import Tier
from sessions.api.library import title_from_text
from sessions.text_safety import inert

ROLE_ICONS = {"system": "⚙", "user": "❯", "assistant": "✦"}
LABEL_LIMIT = 40
"""Longest first line shown for a message, in characters."""
SAVED_MARK = "●"
"""The state after the message is in RAM."""
DISK_MARK = "◐"
"""The state after the message is on disk."""
COLD_MARK = "○"
"""The state after the message is saved nowhere."""
TIER_MARKS: dict[Tier | None, str] = {"ram": SAVED_MARK, "disk": DISK_MARK, None: COLD_MARK}
HEAD_MARK = "»"
CUT_MARK = "…"
"""Ends a line the panel is too narrow for."""
MORE_MARK = "⋯"
RUN_LINE, RUN_LINE_ACTIVE = "│", "┃"
FORK_ACTIVE = {"├": "┣━", "└": "┗━"}
"""The guide of the alternative on the branch shown, by the guide Textual drew."""


@dataclass(frozen=True)
class NodeInfo:
    """What one tree line shows: a message, or a stretch of a run not built yet."""

    message_id: int
    """The message; for a stretch, the first message hidden in it."""
    role: str
    active: bool = False
    head: bool = False
    tier: Tier | None = None
    tier_known: bool = False
    """False until the controller has said where the state is (no mark is drawn)."""
    branch: tuple[int, int] | None = None
    """``(i, n)`` when the message is one of ``n`` alternatives, else None."""
    replies: int = 0
    """How many alternatives follow the message, when there are more than one."""
    hidden: tuple[int, int, int] | None = None
    """A stretch of a run not built yet: ``(id of the run's first message, from, to)``,
    positions in the run, ``to`` excluded; None for a message."""

    above: int = 0
    """A node standing for the forks above a deep branch, not drawn: how many (the message
    is the first one drawn below them)."""

    @property
    def saved(self) -> bool:
        return self.tier is not None

    @property
    def is_message(self) -> bool:
        return self.hidden is None and not self.above

    @property
    def in_run(self) -> bool:
        """Drawn with the run's line rather than a fork's guide."""
        return self.branch is None


def first_line(text: str, limit: int = LABEL_LIMIT) -> str:
    """The message's first non-blank line, shortened, safe to draw."""
    return inert(title_from_text(text, limit)) or "(empty)"


def stretch_words(count: int, earlier: bool) -> str:
    noun = "message" if count == 1 else "messages"
    return f"{MORE_MARK} {count:,} {'earlier' if earlier else 'later'} {noun}"


def replies_words(count: int, role: str) -> str:
    return f"{count} {'replies' if role == 'assistant' else 'versions'}"


class MessageTree(Tree[NodeInfo]):
    """A ``Tree`` that draws llamachat's runs, forks and marks with theme-variable styles."""

    COMPONENT_CLASSES: ClassVar[set[str]] = Tree.COMPONENT_CLASSES | {
        "message-tree--active",
        "message-tree--head",
        "message-tree--saved",
        "message-tree--quiet",
    }
    DEFAULT_CSS = """
    MessageTree {
        & > .message-tree--active { color: $tree-active; text-style: bold; }
        & > .message-tree--head { color: $tree-head; text-style: bold; }
        & > .message-tree--saved { color: $saved-mark; }
        & > .message-tree--quiet { color: $stats-foreground; }
    }
    """

    async def _on_click(self, event: events.Click) -> None:
        """A click on another message only moves the cursor there, so the panel says what
        going there costs before anything happens; a click on the cursor's line goes there,
        as Enter does (``Tree``'s own handler). A click on a stretch not built yet builds it."""
        meta = event.style.meta
        line = meta.get("line")
        if not isinstance(line, int) or meta.get("toggle", False) or line == self.cursor_line:
            return
        node = self.get_node_at_line(line)
        if node is None or node.data is None or node.data.is_message:
            event.prevent_default()
            self.cursor_line = line

    compact = False
    """A narrow panel: no ``‹i/n›`` (the fork's guides show the alternatives) and a one-column
    gap before a message with nothing to fold, so the text keeps the columns."""

    def set_compact(self, compact: bool) -> None:
        if compact != self.compact:
            self.compact = compact
            self.guide_depth = 2 if compact else 3  # lays the lines out again
            self.styles.scrollbar_size_vertical = 1 if compact else 2

    def render_label(self, node: TreeNode[NodeInfo], base_style: Style, style: Style) -> Text:
        info = node.data
        if info is None:
            return super().render_label(node, base_style, style)
        part = lambda name: self.get_component_rich_style(name, partial=True)  # noqa: E731
        if info.above:
            noun = "fork" if info.above == 1 else "forks"
            words = f"{MORE_MARK} {info.above:,} {noun} above: the branch goes on up"
            return Text.assemble(("  ", base_style), (words, part("message-tree--quiet")), style=style)
        if info.hidden is not None:
            _, start, end = info.hidden
            words = stretch_words(end - start, earlier=start == 0)
            top = node.parent is not None and node.parent.is_root
            text = Text.assemble((f"{RUN_LINE} " if top else "  ", base_style + part("tree--guides")),
                                 (words, part("message-tree--quiet")))
            text.stylize(style)
            return text
        if node.allow_expand:
            toggle = self.ICON_NODE_EXPANDED if node.is_expanded else self.ICON_NODE
            prefix = (toggle, base_style + Style.from_meta({"toggle": True}))
        elif info.in_run and node.parent is not None and node.parent.is_root:
            # The top level has no guides to draw a run's line in: it goes where a toggle would.
            line = RUN_LINE_ACTIVE if info.active else RUN_LINE
            prefix = (f"{line} ", base_style + part("message-tree--active" if info.active else "tree--guides"))
        else:
            prefix = (" " if self.compact else "  ", base_style)
        label = node.label
        body = label.copy() if isinstance(label, Text) else Text(label)
        if info.active:
            body.stylize(part("message-tree--active"))
        mark = TIER_MARKS[info.tier] if info.tier_known else " "
        text = Text.assemble(
            prefix,
            (f"{mark} ", part("message-tree--saved" if info.saved else "message-tree--quiet")),
            (f"{ROLE_ICONS.get(info.role, '?')} ", part("message-tree--quiet")),
            # Before the text, so a narrow panel cuts the text, never the marks.
            (f"‹{info.branch[0]}/{info.branch[1]}› " if info.branch and not self.compact else "",
             part("message-tree--active" if info.active else "message-tree--quiet")),
            (f"{HEAD_MARK} " if info.head else "", part("message-tree--head")),
            body,
        )
        if info.replies:
            text.append(f" · {replies_words(info.replies, self._child_role(node))}", part("message-tree--quiet"))
        text.stylize(style)
        return text

    @staticmethod
    def _child_role(node: TreeNode[NodeInfo]) -> str:
        child = node.children[0].data if node.children else None
        return child.role if child is not None else "assistant" if node.data and node.data.role == "user" else "user"

    def render_line(self, y: int) -> Strip:
        """The line as ``_guided_line`` draws it, ending in "…" where the panel cuts it."""
        strip = self._guided_line(y)
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width  # a vertical scrollbar covers the rest
        lines = self._tree_lines
        if width < 2 or not 0 <= y + scroll_y < len(lines):
            return strip
        line = lines[y + scroll_y]
        whole = line._get_guide_width(self.guide_depth, self.show_root) + self.get_label_width(line.node)
        if whole <= scroll_x + width:
            return strip
        kept = strip.crop(0, width - 1)
        last = list(kept)[-1] if kept.cell_length else None
        mark = Strip([Segment(CUT_MARK, last.style if last is not None else None)], 1)
        return Strip.join([kept, mark, strip.crop(width, strip.cell_length)])

    def _guided_line(self, y: int) -> Strip:
        """Textual's line, with the guide of a run's message drawn as the run's line, and the
        guide of the alternative on the branch shown drawn heavy."""
        strip = super().render_line(y)
        scroll_x, scroll_y = self.scroll_offset
        node = self.get_node_at_line(y + scroll_y)
        info = node.data if node is not None else None
        if node is None or info is None or node.parent is None or node.parent.is_root:
            return strip
        depth = 0
        walk: TreeNode[NodeInfo] | None = node
        while walk is not None and not walk.is_root:
            depth, walk = depth + 1, walk.parent
        width = self.guide_depth
        start = (depth - 2) * width - scroll_x
        if start < 0 or start + width > strip.cell_length:
            return strip
        before, guide, after = strip.divide([start, start + width, strip.cell_length])
        drawn = guide.text
        if info.in_run:
            glyph = RUN_LINE_ACTIVE if info.active else RUN_LINE
        elif info.active and drawn[:1] in FORK_ACTIVE:
            glyph = FORK_ACTIVE[drawn[0]]
        else:
            return strip
        style = next(iter(guide), None)
        base = style.style if style is not None and style.style is not None else Style()
        if info.active:
            base += self.get_component_rich_style("message-tree--active", partial=True)
        return Strip.join([before, Strip([Segment(glyph.ljust(width), base)], width), after])
