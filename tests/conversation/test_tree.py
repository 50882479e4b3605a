"""The in-memory conversation tree: navigation, remembered branches, changes, errors."""

from __future__ import annotations

import pytest

from sessions.tree import SAMPLED_BY_UNKNOWN, ConversationTree, GenerationStats, Message, TreeError


def msg(message_id: int, parent: int | None, role: str = "user", text: str | None = None) -> Message:
    return Message(message_id, 1, parent, role, text or f"text {message_id}", float(message_id))  # type: ignore[arg-type]


def sample() -> ConversationTree:
    """1 ─┬─ 2 ─┬─ 4
          │     └─ 5 ── 7
          └─ 3
       6 (a second root)
    """
    return ConversationTree(
        [msg(1, None), msg(2, 1, "assistant"), msg(3, 1, "assistant"), msg(4, 2), msg(5, 2),
         msg(6, None), msg(7, 5, "assistant")]
    )


def ids(messages: list[Message]) -> list[int]:
    return [m.id for m in messages]


def test_lookups_and_shape():
    tree = sample()
    assert len(tree) == 7
    assert 5 in tree and 99 not in tree
    assert tree.get(4).text == "text 4"
    assert ids(tree.roots()) == [1, 6]
    assert ids(tree.children(None)) == [1, 6]
    assert ids(tree.children(2)) == [4, 5]
    assert tree.children(3) == []
    assert tree.parent(7).id == 5
    assert tree.parent(1) is None
    assert ids(tree.path_to(7)) == [1, 2, 5, 7]
    assert ids(tree.path_to(6)) == [6]


def test_siblings_and_index():
    tree = sample()
    assert ids(tree.siblings(5)) == [4, 5]
    assert tree.sibling_index(4) == (1, 2)
    assert tree.sibling_index(5) == (2, 2)
    assert tree.sibling_index(7) == (1, 1)
    assert tree.sibling_index(6) == (2, 2)


def test_children_follow_creation_order_whatever_the_input_order():
    tree = ConversationTree([msg(9, 1), msg(1, None), msg(4, 1)])
    assert ids(tree.children(1)) == [4, 9]


def test_leaves_descendants_and_sizes():
    tree = sample()
    assert ids(tree.leaves()) == [4, 7, 3, 6]
    assert ids(tree.descendants(1)) == [2, 4, 5, 7, 3]
    assert tree.descendants(7) == []
    assert tree.subtree_size(2) == 4
    assert tree.subtree_size(6) == 1


def test_resume_leaf_prefers_newest_child_without_memory():
    tree = sample()
    assert tree.resume_leaf(1).id == 3  # newest child of 1 is 3, a leaf
    assert tree.resume_leaf(2).id == 7
    assert tree.resume_leaf(None).id == 6
    assert tree.resume_leaf(4).id == 4


def test_resume_leaf_follows_remembered_children():
    tree = ConversationTree(_all(sample()), {None: 1, 1: 2, 2: 4})
    assert tree.resume_leaf(None).id == 4
    assert tree.resume_leaf(1).id == 4
    assert tree.remembered() == {None: 1, 1: 2, 2: 4}


def _all(tree: ConversationTree) -> list[Message]:
    return [tree.get(i) for i in range(1, 8)]


def test_remember_path_sets_every_step_and_reports_changes():
    tree = sample()
    changed = tree.remember_path(7)
    assert changed == {None: 1, 1: 2, 2: 5, 5: 7}
    assert tree.remember_path(7) == {}
    assert tree.remember_path(4) == {2: 4}
    assert tree.resume_leaf(1).id == 4
    assert tree.remembered() == {None: 1, 1: 2, 2: 4, 5: 7}


def test_remembered_entries_that_are_not_children_are_dropped():
    tree = ConversationTree(_all(sample()), {1: 7, 2: 5, None: 99})
    assert tree.remembered() == {2: 5}


def test_add_extends_the_tree():
    tree = sample()
    tree.add(msg(8, 3))
    tree.add(msg(9, None))
    assert ids(tree.children(3)) == [8]
    assert ids(tree.roots()) == [1, 6, 9]
    assert tree.sibling_index(9) == (3, 3)
    with pytest.raises(TreeError, match="already in the tree"):
        tree.add(msg(8, 3))
    with pytest.raises(TreeError, match="no message 42"):
        tree.add(msg(10, 42))


def test_replace_keeps_position_and_refuses_moves():
    tree = sample()
    stats = GenerationStats(tokens_generated=5)
    tree.replace(Message(2, 1, 1, "assistant", "text 2", 2.0, stats))
    assert tree.get(2).stats == stats
    assert ids(tree.children(1)) == [2, 3]
    with pytest.raises(TreeError, match="another parent"):
        tree.replace(msg(2, None))


def test_remove_subtree_returns_ids_and_forgets_memory():
    tree = sample()
    tree.remember_path(7)
    removed = tree.remove_subtree(2)
    assert removed == [2, 4, 5, 7]
    assert len(tree) == 3
    assert ids(tree.children(1)) == [3]
    assert tree.remembered() == {None: 1}
    assert tree.resume_leaf(1).id == 3
    for gone in removed:
        assert gone not in tree


def test_remove_root_subtree():
    tree = sample()
    assert tree.remove_subtree(6) == [6]
    assert ids(tree.roots()) == [1]


def test_unknown_ids_raise_a_clear_tree_error():
    tree = sample()
    for call in (tree.get, tree.parent, tree.path_to, tree.siblings, tree.sibling_index,
                 tree.descendants, tree.subtree_size, tree.resume_leaf, tree.remember_path,
                 tree.remove_subtree, tree.children):
        with pytest.raises(TreeError) as caught:
            call(404)
        assert "no message 404" in str(caught.value)
        assert isinstance(caught.value, KeyError)


def test_broken_input_is_refused():
    with pytest.raises(TreeError, match="not in the tree"):
        ConversationTree([msg(2, 1)])
    with pytest.raises(TreeError, match="appears twice"):
        ConversationTree([msg(1, None), msg(1, None)])
    with pytest.raises(TreeError, match="no messages"):
        ConversationTree().resume_leaf(None)


def test_deep_chains_do_not_recurse():
    depth = 20_000
    tree = ConversationTree([msg(i, i - 1 if i > 1 else None) for i in range(1, depth + 1)])
    assert len(tree.path_to(depth)) == depth
    assert ids(tree.leaves()) == [depth]
    assert tree.resume_leaf(None).id == depth
    assert tree.subtree_size(1) == depth
    assert len(tree.remove_subtree(2)) == depth - 1


def test_generation_stats_round_trip_and_tolerance():
    stats = GenerationStats(3, 40, 12, 0.25, 0.3, 48.5, "length")
    assert GenerationStats.from_dict(stats.to_dict()) == stats
    assert GenerationStats.from_dict(None) == GenerationStats()
    loose = GenerationStats.from_dict({"tokens_generated": "7", "future_field": 1, "stop_reason": None})
    assert loose == GenerationStats(tokens_generated=7, sampled_by=SAMPLED_BY_UNKNOWN)  # stored before it was kept
