"""How the tree panel draws a conversation: runs as runs, forks as forks with their count,
the branch shown marked, where each message's state is kept; and the mouse gesture that
shows a cost before going anywhere. Read from the lines the panel draws."""

from __future__ import annotations

from textual.geometry import Region

from tests.tui.helpers import click_tree_line, wait_for
from tests.tui.test_panels import ACTIVE, PanelApp, message, nodes_by_id, sample_tree
from tui.widgets.message_tree import COLD_MARK, DISK_MARK, SAVED_MARK
from tui.widgets.tree_panel import TreePanel

TIERS = {1: None, 2: "ram", 3: None, 4: "disk", 6: "ram"}
"""Where the states are: 5, 7 and 8 are not known yet."""


def drawn(panel: TreePanel) -> dict[int, str]:
    """Message id -> the line the tree draws for it (every node is in view at this size)."""
    tree = panel.message_tree
    tree.render_lines(Region(0, 0, tree.size.width, tree.size.height))  # a frame: its rows are read below
    lines = {}
    for message_id, node in nodes_by_id(panel).items():
        lines[message_id] = "".join(segment.text for segment in tree.render_line(node.line - int(tree.scroll_y)))
    return lines


class Recorder(PanelApp):
    """Also records the messages highlighted (what the screen prices)."""

    def __init__(self, widget) -> None:
        super().__init__(widget)
        self.highlighted: list[int] = []

    def on_tree_panel_node_highlighted(self, event: TreePanel.NodeHighlighted) -> None:
        self.highlighted.append(event.message_id)


async def test_a_run_is_one_line_down_and_a_fork_branches_with_its_count():
    panel = TreePanel()
    async with PanelApp(panel).run_test(size=(90, 20)):
        panel.show(sample_tree(), ACTIVE, TIERS, 6)
        lines = drawn(panel)
        # 5 and 6 follow the second reply with no alternative: a run, one vertical line,
        # the heavy one of the branch shown, at the column of the fork's toggle above.
        column = lines[4].index("▼")
        assert lines[5][column] == "┃" and lines[6][column] == "┃"
        assert "├" not in lines[5] + lines[6] and "└" not in lines[5] + lines[6]
        assert lines[8].strip().startswith("│") and "├" not in lines[8]  # a run off the branch shown
        # The alternatives keep the fork's guides, each says which of how many it is, and
        # the message they fork from says how many there are.
        assert "├─" in lines[3] and "‹1/2›" in lines[3]
        assert "┗━" in lines[4] and "‹2/2›" in lines[4]  # the alternative shown: heavy
        assert "┣━" in lines[2] and "‹1/2›" in lines[2] and "└─" in lines[7] and "‹2/2›" in lines[7]
        assert "· 2 replies" in lines[2] and "· 2 versions" in lines[1]
        assert "replies" not in lines[4] and "‹" not in lines[5]
        assert "┃" not in lines[3]  # an alternative is not drawn as part of a run


async def test_each_message_says_where_its_state_is_kept():
    panel = TreePanel()
    async with PanelApp(panel).run_test(size=(90, 20)):
        panel.show(sample_tree(), ACTIVE, TIERS, 6)
        lines = drawn(panel)
        mark = lambda i: lines[i].split("⚙" if i == 1 else "❯" if i in (2, 5, 7) else "✦")[0].rstrip()[-1]  # noqa: E731
        assert [mark(i) for i in (2, 6)] == [SAVED_MARK, SAVED_MARK]
        assert mark(4) == DISK_MARK and mark(1) == COLD_MARK and mark(3) == COLD_MARK
        assert all(mark(i) not in (SAVED_MARK, DISK_MARK, COLD_MARK) for i in (5, 7, 8))  # not known yet
        panel.set_tiers({5: "disk", 6: None})
        lines = drawn(panel)
        assert mark(5) == DISK_MARK and mark(6) == COLD_MARK
        legend = str(panel.query_one("#tree-summary").render())
        assert f"{SAVED_MARK}RAM" in legend and f"{DISK_MARK}disk" in legend and f"{COLD_MARK}cold" in legend


async def test_a_click_selects_and_prices_the_message_and_enter_goes_there():
    panel = TreePanel()
    app = Recorder(panel)
    async with app.run_test(size=(90, 20)) as pilot:
        panel.show(sample_tree(), ACTIVE, TIERS, 6)
        panel.focus()
        await click_tree_line(pilot, panel, nodes_by_id(panel)[3].line, x=12)
        await wait_for(pilot, lambda: app.highlighted[-1:] == [3], "the click priced")
        assert panel.cursor_message_id == 3
        assert app.chosen == []  # nothing happened yet but the cost asked for
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.chosen == [3], "enter chose the message")
        await click_tree_line(pilot, panel, nodes_by_id(panel)[8].line, x=12)
        await wait_for(pilot, lambda: panel.cursor_message_id == 8, "the cursor moved")
        await click_tree_line(pilot, panel, nodes_by_id(panel)[8].line, x=12)  # the same node again: go there
        await wait_for(pilot, lambda: app.chosen == [3, 8], "the second click chose it")


async def test_the_fork_count_follows_the_tree_when_shown_again():
    panel = TreePanel()
    async with PanelApp(panel).run_test(size=(90, 24)):
        tree = sample_tree()
        tree.add(message(9, 2, "assistant", "A third reply."))
        tree.add(message(10, 2, "assistant", "A fourth reply."))
        panel.show(tree, ACTIVE, TIERS, 6)
        lines = drawn(panel)
        assert "· 4 replies" in lines[2]
        assert ["‹1/4›" in lines[3], "‹2/4›" in lines[4], "‹3/4›" in lines[9], "‹4/4›" in lines[10]] == [True] * 4
        assert [child.data.message_id for child in nodes_by_id(panel)[2].children] == [3, 4, 9, 10]
