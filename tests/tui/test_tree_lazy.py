"""The tree panel builds only what comes into view: a page of a long run, and the branches
of a wide fork while a budget lasts; the rest is built when the user asks for it."""

from __future__ import annotations

from sessions.tree import ConversationTree
from tests.tui.helpers import click_tree_line, wait_for
from tests.tui.test_panels import PanelApp, message, nodes_by_id
from tui.widgets.message_tree import MORE_MARK
from tui.widgets.tree_layout import MAX_FORKS, NODE_BUDGET, RUN_AFTER, RUN_PAGE
from tui.widgets.tree_panel import TreePanel

LONG = 5000


def linear(count: int) -> ConversationTree:
    return ConversationTree(message(i, i - 1 if i > 1 else None, "user" if i % 2 else "assistant", f"message {i}")
                            for i in range(1, count + 1))


class BuiltRecorder(PanelApp):
    """Also records which messages the panel said it built (what the screen asks marks for)."""

    def __init__(self, widget) -> None:
        super().__init__(widget)
        self.built: list[list[int]] = []

    def on_tree_panel_nodes_built(self, event: TreePanel.NodesBuilt) -> None:
        self.built.append(event.message_ids)


def node_count(panel: TreePanel) -> int:
    return len(panel.message_tree._tree_nodes) - 1  # less the hidden root


def stretch_labels(panel: TreePanel) -> list[str]:
    tree = panel.message_tree
    return [tree.render_label(node, tree.rich_style, tree.rich_style).plain.lstrip("│ ")
            for node in panel.message_tree.root.children if node.data is not None and not node.data.is_message]


async def test_a_long_chat_builds_one_page_around_the_head_and_the_next_page_when_asked():
    panel = TreePanel()
    app = BuiltRecorder(panel)
    async with app.run_test(size=(80, 24)) as pilot:
        panel.show(linear(LONG), set(range(1, LONG + 1)), {}, LONG)
        await pilot.pause()
        assert node_count(panel) == RUN_PAGE + 1  # a page of the run, and what stands for the rest
        assert sorted(panel.built_ids) == list(range(LONG - RUN_PAGE + 1, LONG + 1))
        assert panel.cursor_message_id == LONG
        assert stretch_labels(panel) == [f"{MORE_MARK} {LONG - RUN_PAGE:,} earlier messages"]
        assert app.built == [panel.built_ids]
        panel.focus()
        await pilot.press("home")  # the stretch: no message, so nothing is priced
        assert panel.cursor_message_id is None
        await pilot.press("enter")
        await pilot.pause()
        assert node_count(panel) == 2 * RUN_PAGE + 1
        assert sorted(app.built[-1]) == list(range(LONG - 2 * RUN_PAGE + 1, LONG - RUN_PAGE + 1))
        assert stretch_labels(panel) == [f"{MORE_MARK} {LONG - 2 * RUN_PAGE:,} earlier messages"]
        assert app.chosen == []  # building more is not a switch


async def test_a_click_on_a_stretch_builds_it_at_once():
    panel = TreePanel()
    async with PanelApp(panel).run_test(size=(80, 80)) as pilot:
        panel.show(linear(RUN_PAGE + 5), set(), {}, RUN_PAGE + 5)
        await click_tree_line(pilot, panel, 0, x=6)  # the stretch: every line is in view
        await wait_for(pilot, lambda: node_count(panel) == RUN_PAGE + 5, "the stretch built")
        assert stretch_labels(panel) == []
        assert panel.message_tree.root.children[0].data.message_id == 1


async def test_a_cursor_inside_a_long_run_builds_around_it_with_stretches_both_sides():
    panel = TreePanel()
    async with PanelApp(panel).run_test(size=(80, 24)) as pilot:
        middle = LONG // 2
        panel.show(linear(LONG), set(range(1, middle + 1)), {}, middle)
        await pilot.pause()
        first_built, last_built = min(panel.built_ids), max(panel.built_ids)
        assert last_built == middle + RUN_AFTER and last_built - first_built + 1 == RUN_PAGE
        assert stretch_labels(panel) == [f"{MORE_MARK} {first_built - 1:,} earlier messages",
                                         f"{MORE_MARK} {LONG - last_built:,} later messages"]
        panel.focus()
        await pilot.press("end", "enter")
        await pilot.pause()
        assert max(panel.built_ids) == last_built + RUN_PAGE
        assert stretch_labels(panel)[-1] == f"{MORE_MARK} {LONG - last_built - RUN_PAGE:,} later messages"


def wide_fork(count: int) -> ConversationTree:
    """One question answered ``count`` times, each answer followed by a question."""
    messages = [message(1, None, "user", "question")]
    for i in range(count):
        messages.append(message(2 + 2 * i, 1, "assistant", f"answer {i}"))
        messages.append(message(3 + 2 * i, 2 + 2 * i, "user", f"follow-up {i}"))
    return ConversationTree(messages)


async def test_past_the_budget_a_branch_starts_folded_and_is_built_when_unfolded():
    panel = TreePanel()
    app = BuiltRecorder(panel)
    async with app.run_test(size=(80, 24)) as pilot:
        count = NODE_BUDGET  # answers: each with its follow-up, twice the budget in messages
        tree = wide_fork(count)
        head = 3 + 2 * (count - 1)  # the last answer's follow-up
        panel.show(tree, {1, head - 1, head}, {}, head)
        await pilot.pause()
        nodes = nodes_by_id(panel)
        assert node_count(panel) < len(tree) and head in nodes  # the head's branch is built
        folded = [nodes[2 + 2 * i] for i in range(count) if not nodes[2 + 2 * i].is_expanded]
        assert folded and all(not node.children for node in folded)
        assert nodes[2].is_expanded and nodes[2].children  # within the budget: unfolded
        folded[0].expand()
        await pilot.pause()
        answer = folded[0].data.message_id
        assert [child.data.message_id for child in folded[0].children] == [answer + 1]
        assert app.built[-1] == [answer + 1]
        panel.show(tree, {1, head - 1, head}, {}, head)  # drawn again: the branch unfolded stays so
        await pilot.pause()
        assert nodes_by_id(panel)[answer].is_expanded and nodes_by_id(panel)[answer].children


def regenerated_every_time(count: int) -> ConversationTree:
    """Every question answered twice, the chat going on from the second answer: a branch
    that forks ``count`` times, each fork nested in the one before."""
    messages, parent = [], None
    for fork in range(count):
        question = 1 + 3 * fork
        messages += [message(question, parent, "user", f"question {fork}"),
                     message(question + 1, question, "assistant", f"first answer {fork}"),
                     message(question + 2, question, "assistant", f"second answer {fork}")]
        parent = question + 2
    return ConversationTree(messages)


async def test_a_branch_that_forks_thousands_of_times_is_drawn_from_its_last_forks_and_goes_up_on_request():
    panel = TreePanel()
    async with PanelApp(panel).run_test(size=(100, 30)) as pilot:
        forks = LONG // 3
        tree = regenerated_every_time(forks)
        head = 3 * forks
        panel.show(tree, {m.id for m in tree.path_to(head)}, {}, head)  # one Tree level per fork would overflow
        await pilot.pause()
        assert panel.cursor_message_id == head and node_count(panel) < 4 * MAX_FORKS
        tree_widget = panel.message_tree
        above = panel.message_tree.root.children[0]
        label = lambda node: tree_widget.render_label(node, tree_widget.rich_style, tree_widget.rich_style).plain  # noqa: E731
        # the forks drawn: the last MAX_FORKS, counted from the one the drawing starts at
        assert f"{forks - MAX_FORKS:,} forks above" in label(above)
        top = above.data.message_id
        panel.focus()
        await pilot.press("home", "enter")
        await pilot.pause()
        assert panel.cursor_message_id == top  # where the drawing started before: still in view
        assert f"{forks - 2 * MAX_FORKS:,} forks above" in label(panel.message_tree.root.children[0])
        assert node_count(panel) < 8 * MAX_FORKS
