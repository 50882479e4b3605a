"""The whole conversation as a tree: every branch at once, the branch shown picked out.

The conversation view shows one branch; this panel is where the other branches stay
visible, so a user can see that an earlier reply was regenerated three times or that a
question was edited, and go there. A run of messages is drawn as a run and a fork as a
fork with its count (``tui.widgets.message_tree``); the nodes are built as they come into
view, so a long chat opens at once (``tui.widgets.tree_layout``).

Each line is a saved-state mark, a role icon and the first line of the message. The
branch shown is bold in ``$tree-active``, the head carries ``»`` in ``$tree-head`` before
its text (so a narrow panel cuts the text, never the mark). Under the legend, a line says
what making the message under the cursor live would cost (the screen computes it:
``show_cost``); a click only moves the cursor there, Enter or a second click goes there.
That line keeps its row when it has nothing to say, so the tree never moves under the
pointer between the two clicks.
The panel's width is the user's: ``<`` and ``>`` narrow and widen it, and its left edge
(``PanelHandle``) drags; the width chosen is posted (``WidthChosen``) for the screen to
remember, and kept within what leaves the chat room whatever the terminal's size.
The marks come from the controller, read by the screen in a worker: the panel says which
messages it has built (``NodesBuilt``) and is handed their tiers (``set_tiers``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.content import Content
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static, Tree

from sessions.api.chat import Tier
from sessions.tree import ConversationTree
from tui.bindings import bindings_for
from tui.widgets.message_tree import (
    COLD_MARK,
    DISK_MARK,
    HEAD_MARK,
    SAVED_MARK,
    MessageTree,
    NodeInfo,
    first_line,
)
from tui.widgets.panel_handle import PanelHandle
from tui.widgets.tree_layout import MAX_FORKS, TreeLayout

__all__ = ["HEAD_MARK", "LEGEND_TOOLTIP", "SAVED_MARK", "NodeInfo", "TreePanel", "first_line"]

NARROWEST = 12
"""Columns the panel keeps at least: a mark, an icon and a few letters of each message."""
CHAT_ROOM = 24
"""Columns the panel leaves the rest of the screen at least, however wide it is asked to be."""
SHALLOW_BELOW = 32
"""A panel narrower than this draws its lines compact (``MessageTree.compact``): a deep
branch keeps room for its text."""

LEGEND_TOOLTIP = (
    f"{SAVED_MARK} the model state after this message is in RAM: going there is instant\n"
    f"{DISK_MARK} it is on disk: going there reads it back (the cursor resting on it reads it into RAM ahead)\n"
    f"{COLD_MARK} it is saved nowhere: going there decodes from the last saved point\n"
    f"{HEAD_MARK} head: where the next message will be added\n"
    "bold, heavy line: the branch shown; │ a run of messages; ├─ └─ alternatives, ‹i/n›\n"
    "a click: what going to a message costs; enter or a second click: go there;\n"
    "space: fold or unfold a branch; ⋯: more messages, or the forks above, when chosen"
)


class TreePanel(Widget):
    """The conversation tree; enter, or a click on the line under the cursor, posts ``NodeChosen``."""

    BINDINGS: ClassVar[list[BindingType]] = bindings_for("tree")
    DEFAULT_CSS = """
    TreePanel { height: 1fr; }
    TreePanel > #tree-summary { height: auto; padding: 0 0 0 1; color: $stats-foreground; }
    TreePanel > #tree-cost { height: auto; min-height: 1; padding: 0 1; color: $stats-foreground;
                             text-style: italic; }
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

    @dataclass
    class NodesBuilt(Message):
        """Messages came into view: the screen reads where their states are (``set_tiers``)."""

        message_ids: list[int]
        panel: TreePanel | None = field(default=None, repr=False)

        @property
        def control(self) -> TreePanel | None:
            return self.panel

    @dataclass
    class WidthChosen(Message):
        """The user set the panel's width (a key, or the end of a drag): to remember."""

        columns: int

    def __init__(self, *, name: str | None = None, id: str | None = None,
                 classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._head_id: int | None = None
        self._folds: dict[int, bool] = {}
        """Branches the user folded (False) or unfolded (True), by message id."""
        self._pending: tuple[ConversationTree, set[int], dict[int, Tier | None], int | None] | None = None
        self._layout: TreeLayout | None = None
        self._shown: tuple[ConversationTree, set[int], dict[int, Tier | None], int | None] | None = None
        """What ``show`` was last given (drawn again when the user moves the window up)."""
        self._top_id: int | None = None
        """The fork the drawing starts at, for a branch that forks deeper than ``MAX_FORKS``."""
        self._ready = False
        """True once the children exist (``show`` before that is replayed on mount)."""
        self.branch_count = 0
        """How many branches (leaves) the shown tree has."""
        self.wanted_width: int | None = None
        """Columns the user chose (None: the layout's share of the screen)."""
        self._applied_width: int | None = None
        """The width last set (None: the layout's share); ``>`` pressed again before the layout
        has run counts from it, not from the width still drawn."""

    def compose(self) -> ComposeResult:
        yield PanelHandle()
        yield Static(self._summary(None), id="tree-summary")
        yield Static("", id="tree-cost")
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

    # -- its width ----------------------------------------------------------------------------

    def want_width(self, columns: int | None) -> int | None:
        """Be ``columns`` wide (None: the layout's share), within what the screen allows now;
        returns the width applied."""
        self.wanted_width = columns
        return self.fit_width(self.screen.size.width if self.is_attached else 0)

    def fit_width(self, screen_columns: int) -> int | None:
        """Apply the width wanted within ``screen_columns`` (the terminal was resized)."""
        if self.wanted_width is None:
            for rule in ("width", "min_width", "max_width"):
                setattr(self.styles, rule, None)
            self._applied_width = None
            return None
        room = max(screen_columns - CHAT_ROOM, NARROWEST) if screen_columns else self.wanted_width
        columns = max(NARROWEST, min(self.wanted_width, room))
        self.styles.width, self.styles.min_width, self.styles.max_width = columns, columns, columns
        self._applied_width = columns
        return columns

    def action_width(self, delta: int) -> None:
        now = self._applied_width if self._applied_width is not None else self.outer_size.width
        applied = self.want_width(max(NARROWEST, now + delta))
        if applied is not None:
            self.post_message(self.WidthChosen(applied))

    @on(PanelHandle.Dragged)
    def _dragged(self, event: PanelHandle.Dragged) -> None:
        event.stop()
        applied = self.want_width(event.columns)
        if event.done and applied is not None:
            self.post_message(self.WidthChosen(applied))

    def on_resize(self) -> None:
        if self._ready:
            self.message_tree.set_compact(self.size.width < SHALLOW_BELOW)

    @property
    def cursor_message_id(self) -> int | None:
        """The message under the cursor, if any (None on a stretch not built yet)."""
        node = self.message_tree.cursor_node if self._ready else None
        info = node.data if node is not None else None
        return info.message_id if info is not None and info.is_message else None

    @property
    def built_ids(self) -> list[int]:
        """The messages that have a node now."""
        return list(self._layout.nodes) if self._layout is not None else []

    def focus(self, scroll_visible: bool = True) -> TreePanel:
        """Focus the tree inside (the panel itself takes no keys)."""
        self.message_tree.focus(scroll_visible)
        return self

    def show(self, tree: ConversationTree, active_ids: set[int], tiers: Mapping[int, Tier | None],
             head_id: int | None) -> None:
        """Draw ``tree`` again, keeping folds, and the cursor where it sensibly belongs.

        ``tiers`` are the marks known so far (a message left out has none yet). The cursor
        stays on the message it was on, unless it was following the head (or that message
        is gone): then it goes to the new head. Posts ``NodesBuilt``.
        """
        if not self._ready:
            self._pending = (tree, set(active_ids), dict(tiers), head_id)
            return
        self._pending = None
        self._shown = (tree, set(active_ids), dict(tiers), head_id)
        was_on = self.cursor_message_id
        target = was_on if was_on is not None and was_on != self._head_id and was_on in tree else None
        if target is None and head_id is not None and head_id in tree:
            target = head_id
        self._draw(target)
        now_on = self.cursor_message_id
        if was_on is not None and now_on != was_on:  # the cost line spoke of the message left (or deleted)
            self.show_cost("")
            if now_on is not None:
                self.post_message(self.NodeHighlighted(now_on, self))

    def _draw(self, target: int | None) -> None:
        """Build the nodes around ``target`` and put the cursor on it."""
        assert self._shown is not None
        tree, active_ids, tiers, head_id = self._shown
        widget = self.message_tree
        self._head_id = head_id
        self._folds = {message_id: value for message_id, value in self._folds.items() if message_id in tree}
        path_ids = lambda message_id: [m.id for m in tree.path_to(message_id)] if message_id in tree else []  # noqa: E731
        target_path = path_ids(target)
        forks = [message_id for message_id in target_path if len(tree.siblings(message_id)) > 1]
        first = len(forks) - MAX_FORKS  # the fork the drawing starts at (none: the top)
        if self._top_id in forks and forks.index(self._top_id) < first:
            first = forks.index(self._top_id)  # moved up by the user, and still above the cursor
        self._top_id = forks[first] if first > 0 else None
        self._layout = layout = TreeLayout(
            widget, tree, active=active_ids, tiers=tiers, head_id=head_id, folds=self._folds,
            target_path=target_path, head_path=path_ids(head_id),
            top=tree.get(self._top_id) if self._top_id is not None else None, forks_above=max(first, 0))
        layout.build()
        self.branch_count = len(tree.leaves()) if len(tree) else 0
        self.query_one("#tree-summary", Static).update(self._summary(tree))
        chosen = layout.nodes.get(target) if target is not None else None
        if chosen is not None:
            parent = chosen.parent
            while parent is not None and not parent.is_root:
                parent.expand()
                parent = parent.parent
        _ = widget.last_line  # lays the lines out now, so the node knows its line
        widget.move_cursor(chosen)
        if chosen is not None:
            self.call_after_refresh(widget.scroll_to_node, chosen, animate=False)
        self.post_message(self.NodesBuilt(list(layout.nodes), self))

    def _go_up(self) -> None:
        """Draw the branch from ``MAX_FORKS`` forks higher, the cursor on where it started."""
        if self._shown is None or self._top_id is None:
            return
        tree = self._shown[0]
        forks = [m.id for m in tree.path_to(self._top_id) if len(tree.siblings(m.id)) > 1]
        first = len(forks) - 1 - MAX_FORKS
        start = self._top_id
        self._top_id = forks[first] if first > 0 else None
        self._draw(start)

    def set_tiers(self, tiers: Mapping[int, Tier | None]) -> None:
        """Where the states of these messages are kept (``BranchRoutes.checkpoint_tiers``)."""
        if self._layout is not None:
            self._layout.set_tiers(tiers)

    def show_cost(self, words: str) -> None:
        """What making the message under the cursor live would cost ("" clears it; the
        row stays)."""
        self.query_one("#tree-cost", Static).update(Text(words))

    def _summary(self, tree: ConversationTree | None) -> Content:
        if tree is None or not len(tree):
            return Content("No messages yet")
        branches = "1 branch" if self.branch_count == 1 else f"{self.branch_count} branches"
        return Content.assemble(  # two short lines rather than one that wraps in a narrow panel
            f"{branches} · {len(tree)} messages\n",
            (SAVED_MARK, "$saved-mark"), "RAM ",  # tight: a narrow panel keeps it on one line
            (DISK_MARK, "$saved-mark"), "disk ",
            (COLD_MARK, "$stats-foreground"), "cold ",
            (HEAD_MARK, "$tree-head"), "head",
        )

    def _built(self, message_ids: list[int]) -> None:
        if message_ids:
            self.post_message(self.NodesBuilt(message_ids, self))

    @on(Tree.NodeSelected)
    def _chosen(self, event: Tree.NodeSelected[NodeInfo]) -> None:
        event.stop()
        info = event.node.data
        if info is None:
            return
        if info.is_message:
            self.post_message(self.NodeChosen(info.message_id, self))
        elif info.above:
            self._go_up()
        elif self._layout is not None:
            self._built(self._layout.reveal(event.node))

    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted[NodeInfo]) -> None:
        event.stop()
        info = event.node.data
        if info is not None and info.is_message:
            self.post_message(self.NodeHighlighted(info.message_id, self))
        elif info is not None:
            self.show_cost("")

    @on(Tree.NodeCollapsed)
    def _folded(self, event: Tree.NodeCollapsed[NodeInfo]) -> None:
        event.stop()
        if event.node.data is not None:
            self._folds[event.node.data.message_id] = False

    @on(Tree.NodeExpanded)
    def _unfolded(self, event: Tree.NodeExpanded[NodeInfo]) -> None:
        event.stop()
        info = event.node.data
        if info is None or self._layout is None:
            return
        if self._folds.get(info.message_id) is False:
            del self._folds[info.message_id]
        if event.node.id in self._layout.unbuilt:  # folded for want of room: unfolded, it stays so
            self._folds[info.message_id] = True
            self._built(self._layout.build_folded(event.node))
