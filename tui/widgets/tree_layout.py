"""Which messages become nodes of the tree panel, and when: built as they come into view.

Nesting follows the forks, not the messages: a run of messages with no alternatives is
one flat list, and only where the conversation splits do the alternatives become
branches. A chat of thousands of messages would still make thousands of nodes, and
Textual's ``Tree`` measures every node it holds on each change, so nodes are built lazily:

- a long run builds ``RUN_PAGE`` of its messages, around the message the cursor goes to
  (or its start); the rest stands behind "⋯ N earlier messages" / "⋯ N later messages",
  which builds the next page when chosen;
- a fork builds its alternatives while a node budget lasts, and always on the branches
  to the head and to the cursor; past the budget a branch starts folded and its messages
  are built when it is unfolded;
- a branch that forks many times is drawn from ``MAX_FORKS`` forks above the cursor's
  message down (the panel moves that window up on request), and nothing nests deeper
  than ``MAX_DEPTH`` until unfolded: each fork is a level of ``Tree``, which lays its
  lines out by recursion, and a level is three columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from rich.text import Text
from textual.widgets.tree import NodeID, TreeNode

from sessions.api.chat import Tier
from sessions.tree import ConversationTree
from sessions.tree import Message as ChatMessage
from tui.widgets.message_tree import MessageTree, NodeInfo, first_line

RUN_PAGE = 60
"""Messages of a run built at once."""
RUN_AFTER = 10
"""Of those, how many follow the message the cursor goes to, when it is inside the run."""
NODE_BUDGET = 400
"""Nodes a fork's branches may add before further branches start folded (and unbuilt)."""
MAX_FORKS = 8
"""Forks drawn above the cursor's message: a deeper branch is drawn from there down, under
a line that says how many forks are above (each fork nests the branch a level deeper)."""
MAX_DEPTH = 2 * MAX_FORKS + 4
"""Nesting past which branches start folded (and unbuilt), wherever they are."""


class TreeLayout:
    """The nodes of one drawing of ``tree`` in ``widget``, and what is still to build."""

    def __init__(self, widget: MessageTree, tree: ConversationTree, *, active: set[int],
                 tiers: Mapping[int, Tier | None], head_id: int | None, folds: Mapping[int, bool],
                 target_path: list[int], head_path: list[int], top: ChatMessage | None = None,
                 forks_above: int = 0) -> None:
        self.widget, self.tree = widget, tree
        self.active, self.tiers, self.head_id, self.folds = active, tiers, head_id, folds
        self.target_path, self.head_path = set(target_path), set(head_path)
        self.nodes: dict[int, TreeNode[NodeInfo]] = {}
        """Message id -> its node, for every message built."""
        self.unbuilt: dict[NodeID, int] = {}
        """Folded nodes whose branches are not built yet -> their message id."""
        self.top, self.forks_above = top, forks_above
        """Where the drawing starts (None: at the top of the chat), and the forks above it."""
        self._budget_end = NODE_BUDGET
        self._work: list[tuple[TreeNode[NodeInfo], list[ChatMessage], int]] = []
        self._queued = 0
        """Messages waiting in ``_work``: counted against the budget before they are built."""

    def build(self) -> None:
        self.widget.clear()
        if self.top is None:
            self._fill(self.widget.root, self.tree.roots(), 1)
            return
        self.widget.root.add_leaf(Text(""), NodeInfo(self.top.id, self.top.role, above=self.forks_above))
        self._fill(self.widget.root, [self.top], 1)

    def build_folded(self, node: TreeNode[NodeInfo]) -> list[int]:
        """Build the branches under ``node`` (unfolded by the user); the new message ids."""
        message_id = self.unbuilt.pop(node.id, None)
        if message_id is None or message_id not in self.tree:
            return []
        before = set(self.nodes)
        self._budget_end = len(self.nodes) + NODE_BUDGET
        depth, walk = 1, node
        while walk.parent is not None and not walk.parent.is_root:
            depth, walk = depth + 1, walk.parent
        self._fill(node, self.tree.children(message_id), depth + 1)
        return [i for i in self.nodes if i not in before]

    def reveal(self, node: TreeNode[NodeInfo]) -> list[int]:
        """Build the next page of a stretch of a run; the new message ids."""
        info = node.data
        if info is None or info.hidden is None or info.hidden[0] not in self.tree:
            return []
        first_id, start, end = info.hidden
        run = self.run_from(self.tree.get(first_id))
        end = min(end, len(run))
        before = set(self.nodes)
        self._budget_end = len(self.nodes) + NODE_BUDGET
        container = node.parent or self.widget.root
        depth, walk = 1, container
        while not walk.is_root and walk.parent is not None:
            depth, walk = depth + 1, walk.parent
        if start == 0:  # earlier messages: built just below the stretch, which stays on top
            start = max(0, end - RUN_PAGE)
            anchor = node
            for index in range(start, end):
                anchor = self._add_run_message(container, run, index, depth, after=anchor)
            remaining = (first_id, 0, start)
        else:
            stop = min(end, start + RUN_PAGE)
            for index in range(start, stop):
                self._add_run_message(container, run, index, depth, before=node)
            remaining = (first_id, stop, end)
        self._drain()  # a fork at the run's end, built as it comes into view
        if remaining[1] < remaining[2]:
            node.data = replace(info, hidden=remaining, message_id=run[remaining[1]].id)
            node.refresh()
        else:
            node.remove()
        return [i for i in self.nodes if i not in before]

    def set_tiers(self, tiers: Mapping[int, Tier | None]) -> None:
        for message_id, tier in tiers.items():
            node = self.nodes.get(message_id)
            if node is not None and node.data is not None:
                node.data = replace(node.data, tier=tier, tier_known=True)
                node.refresh()

    # -- building -----------------------------------------------------------------------

    def run_from(self, first: ChatMessage) -> list[ChatMessage]:
        """``first`` and the messages that follow it with no alternative between them."""
        run = [first]
        while len(kids := self.tree.children(run[-1].id)) == 1:
            run.append(kids[0])
        return run

    def _fill(self, container: TreeNode[NodeInfo], starts: list[ChatMessage], depth: int) -> None:
        """Build ``starts`` under ``container`` and the branches below them that are
        built now (a work list, not recursion: a chat may fork thousands of times deep)."""
        self._queue(container, starts, depth)
        self._drain()

    def _queue(self, container: TreeNode[NodeInfo], starts: list[ChatMessage], depth: int) -> None:
        """``starts`` to build under ``container``, whose children are at ``depth``."""
        self._work.append((container, starts, depth))
        self._queued += len(starts)

    def _drain(self) -> None:
        while self._work:
            container, starts, depth = self._work.pop()
            self._queued -= len(starts)
            if len(starts) == 1:
                self._add_run(container, starts[0], depth)
            else:
                for message in starts:
                    self._add(container, message, self.tree.children(message.id), depth, branch=True)

    def _add_run(self, container: TreeNode[NodeInfo], first: ChatMessage, depth: int) -> None:
        run = self.run_from(first)
        start, end = self._window(run)
        if start > 0:
            self._add_stretch(container, run, 0, start)
        for index in range(start, end):
            self._add_run_message(container, run, index, depth)
        if end < len(run):
            self._add_stretch(container, run, end, len(run))

    def _window(self, run: list[ChatMessage]) -> tuple[int, int]:
        """The positions of ``run`` to build: around the cursor's target, else the head."""
        if len(run) <= RUN_PAGE:
            return 0, len(run)
        anchor = None
        for path in (self.target_path, self.head_path):
            anchor = next((i for i in range(len(run) - 1, -1, -1) if run[i].id in path), None)
            if anchor is not None:
                break
        if anchor is None:
            return 0, RUN_PAGE
        end = min(len(run), anchor + 1 + RUN_AFTER)
        return max(0, end - RUN_PAGE), end

    def _add_stretch(self, container: TreeNode[NodeInfo], run: list[ChatMessage], start: int, end: int) -> None:
        info = NodeInfo(run[start].id, run[start].role, hidden=(run[0].id, start, end))
        container.add_leaf(Text(""), info)

    def _add_run_message(self, container: TreeNode[NodeInfo], run: list[ChatMessage], index: int, depth: int, *,
                         before: TreeNode[NodeInfo] | None = None,
                         after: TreeNode[NodeInfo] | None = None) -> TreeNode[NodeInfo]:
        message = run[index]
        kids = self.tree.children(message.id) if index == len(run) - 1 else []
        return self._add(container, message, kids, depth, branch=False, before=before, after=after)

    def _add(self, container: TreeNode[NodeInfo], message: ChatMessage, kids: list[ChatMessage], depth: int, *,
             branch: bool, before: TreeNode[NodeInfo] | None = None,
             after: TreeNode[NodeInfo] | None = None) -> TreeNode[NodeInfo]:
        """One message: a leaf, or (with ``kids`` that fork, or that continue an
        alternative) a node whose branches are built now or when it is unfolded."""
        index, count = self.tree.sibling_index(message.id) if branch else (1, 1)
        known = message.id in self.tiers
        info = NodeInfo(message.id, message.role, message.id in self.active, message.id == self.head_id,
                        self.tiers.get(message.id), known, (index, count) if count > 1 else None,
                        len(kids) if len(kids) > 1 else 0)
        label = Text(first_line(message.text))
        opens = len(kids) > 1 or (branch and bool(kids))
        if not opens:
            node = container.add_leaf(label, info, before=before, after=after)
            self.nodes[message.id] = node
            return node
        on_path = depth < MAX_DEPTH and (message.id in self.target_path or message.id in self.head_path)
        room = depth < MAX_DEPTH and len(self.nodes) + self._queued < self._budget_end
        expanded = self.folds.get(message.id, on_path or room)
        node = container.add(label, info, before=before, after=after, expand=expanded)
        self.nodes[message.id] = node
        if expanded or on_path:
            self._queue(node, kids, depth + 1)
        else:
            self.unbuilt[node.id] = message.id
        return node
