"""Find in the open chat: the branch shown first, in order, then the other branches."""

from __future__ import annotations

from sessions.controller.find import FindHit, find_in
from sessions.tree import ConversationTree, Message


def tree() -> ConversationTree:
    def m(mid: int, parent: int | None, role: str, text: str) -> Message:
        return Message(id=mid, session_id=1, parent_id=parent, role=role, text=text, created_at=float(mid))

    return ConversationTree([
        m(1, None, "user", "Tell me about zebras."),
        m(2, 1, "assistant", "Zebras have stripes. A ZEBRA foal too."),
        m(3, 1, "assistant", "Striped horses, zebras."),  # another version: another branch
        m(4, 2, "user", "And lions?"),
        m(5, 4, "assistant", "Lions hunt zebras."),
    ])


def test_the_branch_shown_comes_first_in_its_order_then_the_others():
    hits = find_in(tree(), [1, 2, 4, 5], "zebra")
    assert [(h.message_id, h.on_branch) for h in hits] == [(1, True), (2, True), (5, True), (3, False)]
    assert hits[1] == FindHit(2, ((0, 5), (23, 28)), True)  # case ignored, every match marked


def test_spans_point_into_the_original_text_where_folding_changes_lengths():
    text = "Die Straße, STRASSE."
    t = ConversationTree([Message(id=1, session_id=1, parent_id=None, role="user", text=text, created_at=0.0)])
    (hit,) = find_in(t, [1], "strasse")
    assert [t.get(1).text[a:b] for a, b in hit.spans] == ["Straße", "STRASSE"]


def test_an_empty_query_finds_nothing():
    assert find_in(tree(), [1, 2], "  ") == []
