"""The tree panel and the session list, mounted in a small app and driven with real keys."""

from __future__ import annotations

from rich.style import Style
from textual.app import App, ComposeResult
from textual.widget import Widget

from sessions.store import SessionSummary
from sessions.tree import ConversationTree, Message
from tui.theme_loader import default_variables, register_themes
from tui.widgets.session_list import CURRENT_MARK, SessionList, relative_time
from tui.widgets.tree_panel import HEAD_MARK, SAVED_MARK, TreePanel, first_line

NOW = 1_750_000_000.0


def message(message_id: int, parent_id: int | None, role: str, text: str) -> Message:
    return Message(id=message_id, session_id=1, parent_id=parent_id, role=role, text=text,
                   created_at=NOW + message_id)


def sample_tree() -> ConversationTree:
    """A system prompt, an edited question (2 vs 7) and a regenerated reply (3 vs 4)."""
    return ConversationTree([
        message(1, None, "system", "You are a terse assistant."),
        message(2, 1, "user", "What is a KV cache?\nAsked twice."),
        message(3, 2, "assistant", "Keys and values of past tokens."),
        message(4, 2, "assistant", "The memory of the attention layers."),
        message(5, 4, "user", "And sliding-window attention?"),
        message(6, 5, "assistant", "Only the last few thousand tokens are kept."),
        message(7, 1, "user", "What is a KV cache, briefly?"),
        message(8, 7, "assistant", "Saved attention state."),
    ])


ACTIVE = {1, 2, 4, 5, 6}
SAVED = {2: "ram", 6: "ram", 5: None}
"""Where the states are kept: 5 is known to be saved nowhere, the others are not known yet."""


class PanelApp(App[None]):
    """Mounts one widget and records what it posts."""

    def __init__(self, widget: Widget) -> None:
        super().__init__()
        register_themes(self)
        self.widget = widget
        self.chosen: list[int] = []

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return default_variables()

    def compose(self) -> ComposeResult:
        yield self.widget

    def on_mount(self) -> None:
        self.theme = "llamachat-dark"

    def on_tree_panel_node_chosen(self, event: TreePanel.NodeChosen) -> None:
        self.chosen.append(event.message_id)

    def on_session_list_session_chosen(self, event: SessionList.SessionChosen) -> None:
        self.chosen.append(event.session_id)


def nodes_by_id(panel: TreePanel) -> dict:
    found, stack = {}, list(panel.message_tree.root.children)
    while stack:
        node = stack.pop()
        found[node.data.message_id] = node
        stack.extend(node.children)
    return found


def child_ids(node) -> list[int]:
    return [child.data.message_id for child in node.children]


async def test_tree_panel_shows_every_branch_nested_by_forks():
    panel = TreePanel()
    async with PanelApp(panel).run_test():
        panel.show(sample_tree(), ACTIVE, SAVED, 6)
        nodes = nodes_by_id(panel)
        assert set(nodes) == set(range(1, 9))
        assert child_ids(panel.message_tree.root) == [1]
        assert child_ids(nodes[1]) == [2, 7]  # the edit: two versions of the question
        assert child_ids(nodes[2]) == [3, 4]  # the regenerated reply
        assert child_ids(nodes[4]) == [5, 6]  # a run without forks stays flat
        assert child_ids(nodes[7]) == [8]
        assert panel.branch_count == 3
        summary = str(panel.query_one("#tree-summary").render())
        assert "3 branches" in summary and "8 messages" in summary


async def test_tree_panel_marks_the_active_path_the_head_and_saved_states():
    panel = TreePanel()
    async with PanelApp(panel).run_test():
        panel.show(sample_tree(), ACTIVE, SAVED, 6)
        nodes = nodes_by_id(panel)
        assert {i for i, node in nodes.items() if node.data.active} == ACTIVE
        assert {i for i, node in nodes.items() if node.data.saved} == {2, 6}
        assert [i for i, node in nodes.items() if node.data.head] == [6]
        assert nodes[3].data.branch == (1, 2) and nodes[4].data.branch == (2, 2)
        assert nodes[5].data.branch is None
        render = lambda i: panel.message_tree.render_label(nodes[i], Style(), Style())  # noqa: E731
        head = render(6)
        assert HEAD_MARK in head.plain and SAVED_MARK in head.plain
        assert "Only the last few thousand tokens" in head.plain
        assert SAVED_MARK not in render(5).plain and HEAD_MARK not in render(5).plain
        assert "‹2/2›" in render(4).plain
        assert render(2).plain.count("What is a KV cache?") == 1 and "Asked twice" not in render(2).plain
        bold_on = lambda text: any(s.style.bold for s in text.spans if not isinstance(s.style, str))  # noqa: E731
        assert bold_on(render(4)) and not bold_on(render(3))


async def test_enter_posts_node_chosen_for_the_message_under_the_cursor():
    panel = TreePanel()
    app = PanelApp(panel)
    async with app.run_test() as pilot:
        panel.show(sample_tree(), ACTIVE, SAVED, 6)
        panel.focus()
        assert panel.cursor_message_id == 6  # the cursor starts on the head
        await pilot.press("enter")
        await pilot.press("up", "up", "enter")
        await pilot.pause()
        assert app.chosen == [6, 4]


async def test_show_again_follows_the_head_keeps_a_moved_cursor_and_folds():
    panel = TreePanel()
    async with PanelApp(panel).run_test() as pilot:
        tree = sample_tree()
        panel.show(tree, ACTIVE, SAVED, 6)
        panel.focus()
        tree.add(message(9, 6, "user", "Thanks!"))
        panel.show(tree, ACTIVE | {9}, SAVED, 9)
        assert panel.cursor_message_id == 9  # it was on the head, so it follows it
        await pilot.press("up", "up", "up", "up")
        assert panel.cursor_message_id == 3
        await pilot.press("up", "space")  # fold the regenerated-reply fork at message 2
        await pilot.pause()
        assert not nodes_by_id(panel)[2].is_expanded
        tree.add(message(10, 9, "assistant", "You're welcome."))
        panel.show(tree, ACTIVE | {9, 10}, SAVED | {10: "ram"}, 10)
        assert panel.cursor_message_id == 2  # moved by the user: it stays
        assert not nodes_by_id(panel)[2].is_expanded
        assert nodes_by_id(panel)[10].data.head


async def test_an_empty_tree_shows_a_plain_message():
    panel = TreePanel()
    async with PanelApp(panel).run_test():
        panel.show(ConversationTree(), set(), set(), None)
        assert len(panel.message_tree.root.children) == 0
        assert panel.cursor_message_id is None
        assert "No messages yet" in str(panel.query_one("#tree-summary").render())


async def test_show_before_mounting_is_applied_on_mount():
    panel = TreePanel()
    panel.show(sample_tree(), ACTIVE, SAVED, 6)
    async with PanelApp(panel).run_test():
        assert panel.cursor_message_id == 6 and panel.branch_count == 3
    widget = SessionList()
    widget.show(summaries(), current_id=2, now=NOW)
    async with PanelApp(widget).run_test():
        assert widget.session_ids == [3, 2, 1] and widget.options.highlighted == 1


def test_first_line_is_short_and_safe():
    assert first_line("\n  Hello there\nsecond line") == "Hello there"
    assert first_line("") == "(empty)"
    assert "\x1b" not in first_line("\x1b[31mred")
    assert len(first_line("word " * 40)) <= 41


def summaries() -> list[SessionSummary]:
    return [
        SessionSummary(1, "Oldest chat", NOW - 9 * 86400, 4),
        SessionSummary(3, "Newest chat", NOW - 30, 1),
        SessionSummary(2, "Middle chat", NOW - 7200, 12),
    ]


async def test_session_list_is_newest_first_and_marks_the_current_one():
    widget = SessionList()
    async with PanelApp(widget).run_test():
        widget.show(summaries(), current_id=2, now=NOW)
        assert widget.session_ids == [3, 2, 1]
        prompts = [str(option.prompt) for option in widget.options.options]
        assert prompts[0].startswith("  Newest chat") and "#3 · just now · 1 message" in prompts[0]
        assert prompts[1].startswith(f"{CURRENT_MARK} Middle chat") and "#2 · 2 h ago · 12 messages" in prompts[1]
        assert "Oldest chat" in prompts[2] and "·" in prompts[2]
        assert widget.options.highlighted == 1  # starts on the current session


async def test_session_list_posts_session_chosen_and_keeps_the_highlight():
    widget = SessionList()
    app = PanelApp(widget)
    async with app.run_test() as pilot:
        widget.show(summaries(), current_id=3, now=NOW)
        widget.focus()
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        assert app.chosen == [1]
        widget.show([*summaries(), SessionSummary(4, "Brand new", NOW, 0)], current_id=4, now=NOW)
        assert widget.session_ids[0] == 4
        assert widget.session_ids[widget.options.highlighted] == 1


def test_relative_time_reads_like_speech():
    assert relative_time(NOW - 5, NOW) == "just now"
    assert relative_time(NOW - 300, NOW) == "5 min ago"
    assert relative_time(NOW - 3 * 3600, NOW) == "3 h ago"
    assert relative_time(NOW - 30 * 3600, NOW) == "yesterday"
    assert relative_time(NOW - 4 * 86400, NOW) == "4 days ago"
    assert relative_time(NOW - 40 * 86400, NOW)[:2] == "20"  # a date, year first


async def test_a_long_title_in_the_session_list_ends_in_an_ellipsis_instead_of_wrapping(make_app):
    from tests.tui.helpers import ready, screen_text, send

    app = make_app()
    async with app.run_test(size=(100, 24)) as pilot:
        await ready(pilot)
        await send(pilot, "A very long first question that makes a long title for the list of chats here")
        await pilot.press("ctrl+l")
        await pilot.pause()
        lines = [line.split("▕")[0] for line in screen_text(app)[:2]]
        assert lines[0].startswith(f"{CURRENT_MARK} A very long") and lines[0].rstrip().endswith("…")
        assert lines[1].startswith("  #1 · ")  # the next line is this chat's own, indented
