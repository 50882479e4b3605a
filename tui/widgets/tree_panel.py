"""The whole conversation as a tree: every branch at once, the active one picked out.

The conversation view shows one branch; this panel is where the other branches stay
visible, so a user can see that an earlier reply was regenerated three times or that a
question was edited, and jump there. Nesting follows the *forks*, not the messages: a
run of messages with no alternatives is listed flat, and only where the conversation
splits do the alternatives become indented branches. A long chat therefore stays
narrow, and the depth of the tree says how many times the path forked.

Each line is a saved-state mark, a role icon and the first line of the message. The
active path is bold in ``$tree-active``, the head carries ``»`` in ``$tree-head`` before
its text (so a narrow panel cuts the text, never the mark), and ``●`` in ``$saved-mark``
marks messages whose model state is checkpointed (going there costs no prompt
processing). Under the legend, a line says what making the message under the cursor
live would cost (the screen computes it: ``show_cost``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.content import Content
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from sessions.controller import ConversationTree, title_from_text
from sessions.controller import Message as ChatMessage
from tui.safe_text import inert

ROLE_ICONS = {"system": "⚙", "user": "❯", "assistant": "✦"}
LABEL_LIMIT = 40
"""Longest first line shown for a message, in characters."""
SAVED_MARK = "●"
HEAD_MARK = "»"
LEGEND_TOOLTIP = (
    f"{SAVED_MARK} the model state after this message is saved: going there is instant\n"
    f"{HEAD_MARK} head: where the next message will be added\n"
    "bold: the active branch\n"
    "enter or a click on the cursor's line: switch to the message under the cursor,\n"
    "space: fold or unfold a branch"
)


@dataclass(frozen=True)
class NodeInfo:
    """What one tree line shows about its message."""

    message_id: int
    role: str
    active: bool = False
    head: bool = False
    saved: bool = False
    branch: tuple[int, int] | None = None
    """``(i, n)`` when the message is one of ``n`` alternatives, else None."""


def first_line(text: str, limit: int = LABEL_LIMIT) -> str:
    """The message's first non-blank line, shortened, safe to draw."""
    return inert(title_from_text(text, limit)) or "(empty)"


class MessageTree(Tree[NodeInfo]):
    """A ``Tree`` that draws llamachat's marks with theme-variable styles."""

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
        """A click on another line only moves the cursor there, so the panel says what going
        there costs before anything happens; a click on the cursor's line goes there, as
        Enter does (``Tree``'s own handler, which switched on the first click)."""
        meta = event.style.meta
        line = meta.get("line")
        if isinstance(line, int) and not meta.get("toggle", False) and line != self.cursor_line:
            event.prevent_default()
            self.cursor_line = line

    def render_label(self, node: TreeNode[NodeInfo], base_style: Style, style: Style) -> Text:
        info = node.data
        if info is None:
            return super().render_label(node, base_style, style)
        part = lambda name: self.get_component_rich_style(name, partial=True)  # noqa: E731
        if node.allow_expand:
            toggle = self.ICON_NODE_EXPANDED if node.is_expanded else self.ICON_NODE
            prefix = (toggle, base_style + Style.from_meta({"toggle": True}))
        else:
            prefix = ("  ", base_style)
        label = node.label
        body = label.copy() if isinstance(label, Text) else Text(label)
        if info.active:
            body.stylize(part("message-tree--active"))
        text = Text.assemble(
            prefix,
            (f"{SAVED_MARK} " if info.saved else "  ", part("message-tree--saved")),
            (f"{ROLE_ICONS.get(info.role, '?')} ", part("message-tree--quiet")),
            (f"{HEAD_MARK} " if info.head else "", part("message-tree--head")),
            body,
        )
        if info.branch is not None:
            text.append(f" ‹{info.branch[0]}/{info.branch[1]}›", part("message-tree--quiet"))
        text.stylize(style)
        return text


class TreePanel(Widget):
    """The conversation tree; enter, or a click on the line under the cursor, posts ``NodeChosen``."""

    DEFAULT_CSS = """
    TreePanel { height: 1fr; }
    TreePanel > #tree-summary { height: auto; padding: 0 1; color: $stats-foreground; }
    TreePanel > #tree-cost { height: auto; padding: 0 1; color: $stats-foreground; text-style: italic; }
    TreePanel > MessageTree { height: 1fr; }
    """

    @dataclass
    class NodeChosen(Message):
        """The user picked a message in the tree (to make it the head)."""

        message_id: int
        panel: TreePanel | None = field(default=None, repr=False)

        @property
        def control(self) -> TreePanel | None:
            return self.panel

    @dataclass
    class NodeHighlighted(Message):
        """The cursor moved onto a message (the screen says what going there costs)."""

        message_id: int
        panel: TreePanel | None = field(default=None, repr=False)

        @property
        def control(self) -> TreePanel | None:
            return self.panel

    def __init__(self, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._head_id: int | None = None
        self._collapsed: set[int] = set()
        self._pending: tuple[ConversationTree, set[int], set[int], int | None] | None = None
        self._ready = False
        """True once the children exist (``show`` before that is replayed on mount)."""
        self.branch_count = 0
        """How many branches (leaves) the shown tree has."""

    def compose(self) -> ComposeResult:
        yield Static(self._summary(None), id="tree-summary")
        cost = Static("", id="tree-cost")
        cost.display = False
        yield cost
        tree = MessageTree("conversation", id="message-tree")
        tree.show_root = False
        tree.auto_expand = False
        tree.guide_depth = 3
        tree.tooltip = LEGEND_TOOLTIP
        yield tree

    def on_mount(self) -> None:
        self._ready = True
        if self._pending is not None:
            self.show(*self._pending)

    @property
    def message_tree(self) -> MessageTree:
        return self.query_one(MessageTree)

    @property
    def cursor_message_id(self) -> int | None:
        """The message under the cursor, if any."""
        node = self.message_tree.cursor_node if self._ready else None
        return None if node is None or node.data is None else node.data.message_id

    def focus(self, scroll_visible: bool = True) -> TreePanel:
        """Focus the tree inside (the panel itself takes no keys)."""
        self.message_tree.focus(scroll_visible)
        return self

    def show(self, tree: ConversationTree, active_ids: set[int], saved_ids: set[int],
             head_id: int | None) -> None:
        """Draw ``tree`` again, keeping folds, and the cursor where it sensibly belongs.

        The cursor stays on the message it was on, unless it was following the head (or
        that message is gone): then it goes to the new head.
        """
        if not self._ready:
            self._pending = (tree, set(active_ids), set(saved_ids), head_id)
            return
        self._pending = None
        widget = self.message_tree
        was_on = self.cursor_message_id
        target = was_on if was_on is not None and was_on != self._head_id and was_on in tree else None
        if target is None and head_id is not None and head_id in tree:
            target = head_id
        self._head_id = head_id
        self._collapsed = {message_id for message_id in self._collapsed if message_id in tree}
        nodes = self._build(widget, tree, set(active_ids), set(saved_ids), head_id)
        self.branch_count = len(tree.leaves()) if len(tree) else 0
        self.query_one("#tree-summary", Static).update(self._summary(tree))
        chosen = nodes.get(target) if target is not None else None
        if chosen is not None:
            parent = chosen.parent
            while parent is not None and not parent.is_root:
                parent.expand()
                parent = parent.parent
        _ = widget.last_line  # lays the lines out now, so the node knows its line
        widget.move_cursor(chosen)
        if chosen is not None:
            self.call_after_refresh(widget.scroll_to_node, chosen, animate=False)

    def _build(self, widget: MessageTree, tree: ConversationTree, active: set[int],
               saved: set[int], head_id: int | None) -> dict[int, TreeNode[NodeInfo]]:
        """Fill the widget: flat runs of single children, one nested node per fork."""
        widget.clear()
        nodes: dict[int, TreeNode[NodeInfo]] = {}

        def add(container: TreeNode[NodeInfo], message: ChatMessage, opens: bool) -> TreeNode[NodeInfo]:
            index, count = tree.sibling_index(message.id)
            info = NodeInfo(message.id, message.role, message.id in active,
                            message.id == head_id, message.id in saved,
                            (index, count) if count > 1 else None)
            label = Text(first_line(message.text))
            if opens:
                node = container.add(label, info, expand=message.id not in self._collapsed)
            else:
                node = container.add_leaf(label, info)
            nodes[message.id] = node
            return node

        work: list[tuple[TreeNode[NodeInfo], list[ChatMessage]]] = [(widget.root, tree.roots())]
        while work:
            container, starts = work.pop()
            if len(starts) == 1:
                message = starts[0]
                while True:
                    kids = tree.children(message.id)
                    node = add(container, message, opens=len(kids) > 1)
                    if len(kids) == 1:
                        message = kids[0]
                        continue
                    if kids:
                        work.append((node, kids))
                    break
            else:
                for message in starts:
                    kids = tree.children(message.id)
                    node = add(container, message, opens=bool(kids))
                    if kids:
                        work.append((node, kids))
        return nodes

    def show_cost(self, words: str) -> None:
        """What making the message under the cursor live would cost ("" clears it)."""
        line = self.query_one("#tree-cost", Static)
        line.update(Text(words))
        line.display = bool(words)

    def _summary(self, tree: ConversationTree | None) -> Content:
        if tree is None or not len(tree):
            return Content("No messages yet")
        branches = "1 branch" if self.branch_count == 1 else f"{self.branch_count} branches"
        return Content.assemble(  # two short lines rather than one that wraps in a narrow panel
            f"{branches} · {len(tree)} messages\n",
            (SAVED_MARK, "$saved-mark"), " saved  ",
            (HEAD_MARK, "$tree-head"), " head",
        )

    @on(Tree.NodeSelected)
    def _chosen(self, event: Tree.NodeSelected[NodeInfo]) -> None:
        event.stop()
        if event.node.data is not None:
            self.post_message(self.NodeChosen(event.node.data.message_id, self))

    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted[NodeInfo]) -> None:
        event.stop()
        if event.node.data is not None:
            self.post_message(self.NodeHighlighted(event.node.data.message_id, self))

    @on(Tree.NodeCollapsed)
    def _folded(self, event: Tree.NodeCollapsed[NodeInfo]) -> None:
        event.stop()
        if event.node.data is not None:
            self._collapsed.add(event.node.data.message_id)

    @on(Tree.NodeExpanded)
    def _unfolded(self, event: Tree.NodeExpanded[NodeInfo]) -> None:
        event.stop()
        if event.node.data is not None:
            self._collapsed.discard(event.node.data.message_id)
