"""Snapshots of the tree panel and the session list at a fixed size, with fixed data.

Ids, texts and times are constants so the pictures only change when the drawing does.
Update them deliberately with ``pytest --snapshot-update`` after checking the new SVGs.
"""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widget import Widget

from sessions.store import SessionSummary
from sessions.tree import ConversationTree, Message
from tui.theme_loader import default_variables, register_themes
from tui.widgets.session_list import SessionList
from tui.widgets.tree_panel import TreePanel

SIZE = (100, 30)
NOW = 1_750_000_000.0


def fixed_tree() -> ConversationTree:
    texts = [
        (1, None, "system", "You are a terse assistant."),
        (2, 1, "user", "What is a KV cache?"),
        (3, 2, "assistant", "Keys and values of past tokens, kept so they are not recomputed."),
        (4, 2, "assistant", "The memory of the attention layers."),
        (5, 4, "user", "And sliding-window attention?"),
        (6, 5, "assistant", "Only the last few thousand tokens are kept."),
        (7, 1, "user", "What is a KV cache, briefly?"),
        (8, 7, "assistant", "Saved attention state."),
    ]
    return ConversationTree(
        Message(id=i, session_id=1, parent_id=p, role=r, text=t, created_at=NOW + i)
        for i, p, r, t in texts
    )


def forked_tree() -> ConversationTree:
    """A question answered four times, the second answer followed by a run of four messages
    (the branch shown), and a long run before it all that is built a page at a time."""
    texts = [(1, None, "system", "You are a terse assistant.")]
    texts += [(i, i - 1, "user" if i % 2 == 0 else "assistant", f"Earlier turn {i}.") for i in range(2, 72)]
    texts += [
        (72, 71, "user", "Name a fast sorting algorithm."),
        (73, 72, "assistant", "Quicksort."),
        (74, 72, "assistant", "Merge sort, stable and O(n log n)."),
        (75, 72, "assistant", "Radix sort, for integers."),
        (76, 72, "assistant", "Timsort."),
        (77, 74, "user", "Why stable?"),
        (78, 77, "assistant", "Equal keys keep their order."),
        (79, 78, "user", "Thanks."),
        (80, 79, "assistant", "You're welcome."),
        (81, 76, "user", "Where is it used?"),
    ]
    return ConversationTree(
        Message(id=i, session_id=1, parent_id=p, role=r, text=t, created_at=NOW + i)
        for i, p, r, t in texts
    )


FORKED_TIERS = {72: "disk", 73: None, 74: "ram", 75: None, 76: "disk", 77: None, 78: "ram", 79: None, 80: "ram"}


class SnapshotApp(App[None]):
    """One panel on the left of an otherwise empty screen, in llamachat-dark."""

    CSS = """
    Screen { layout: horizontal; }
    TreePanel, SessionList { width: 64; border: round $primary; }
    """

    def __init__(self, widget: Widget, forked: bool = False) -> None:
        super().__init__()
        register_themes(self)
        self.widget = widget
        self.forked = forked

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return default_variables()

    def compose(self) -> ComposeResult:
        yield self.widget

    def on_mount(self) -> None:
        self.theme = "llamachat-dark"
        if isinstance(self.widget, TreePanel) and self.forked:
            self.widget.show(forked_tree(), {*range(1, 73), 74, 77, 78, 79, 80}, FORKED_TIERS, 80)
        elif isinstance(self.widget, TreePanel):
            self.widget.show(fixed_tree(), {1, 2, 4, 5, 6}, {2: "ram", 6: "ram"}, 6)
        else:
            self.widget.show([
                SessionSummary(1, "Planning the garden", NOW - 3 * 86400, 14),
                SessionSummary(2, "What is a KV cache?", NOW - 40, 8),
                SessionSummary(3, "Rust lifetimes", NOW - 5 * 3600, 1),
            ], current_id=2, now=NOW)
        self.widget.focus()


def test_tree_panel_with_branches_marks_and_head(snap_compare):
    assert snap_compare(SnapshotApp(TreePanel()), terminal_size=SIZE)


def test_tree_panel_with_a_folded_fork(snap_compare):
    # From the head (message 6) up to message 2, then fold its two replies.
    assert snap_compare(SnapshotApp(TreePanel()), terminal_size=SIZE,
                        press=["up", "up", "up", "up", "space"])


def test_tree_panel_runs_forks_with_their_counts_and_where_states_are(snap_compare):
    # Runs drawn as one line (heavy on the branch shown), the four answers as a fork with
    # ‹i/4› each and "4 replies" on the question, RAM, disk and cold marks, the long run
    # before it all built a page at a time behind "⋯ N earlier messages".
    assert snap_compare(SnapshotApp(TreePanel(), forked=True), terminal_size=SIZE)


def test_session_list_newest_first_with_the_current_session(snap_compare):
    assert snap_compare(SnapshotApp(SessionList()), terminal_size=SIZE)
