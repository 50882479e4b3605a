"""Conversation: tree gestures that persist (append, fork, edit, select, page, rewind, delete)."""

from __future__ import annotations

import pytest

from sessions.controller.conversation import Conversation
from sessions.store import SessionStore
from sessions.tree import GenerationStats, TreeError


@pytest.fixture
def store():
    with SessionStore.open() as opened:
        yield opened


@pytest.fixture
def chat(store):
    return Conversation(store, store.create_session().id)


def texts(messages) -> list[str]:
    return [m.text for m in messages]


def reopened(chat: Conversation) -> Conversation:
    """The same session loaded from disk afresh, as after a restart."""
    return Conversation(chat._store, chat.session_id)


def test_append_builds_the_active_path(chat):
    assert chat.head is None and chat.active_path() == []
    q = chat.append("user", "Q1")
    a = chat.append("assistant", "A1", stats=GenerationStats(tokens_generated=2), tokens={"fp": [5, 6]})
    assert chat.head == a and a.parent_id == q.id
    assert texts(chat.active_path()) == ["Q1", "A1"]
    assert chat.session.active_leaf_id == a.id
    assert chat.session.title == "Q1"
    assert chat._store.get_tokens(a.id, "fp") == [5, 6]
    again = reopened(chat)
    assert again.head == a and again.tree.get(a.id).stats.tokens_generated == 2
    assert again.tree.remembered() == {None: q.id, q.id: a.id}


def test_edit_adds_a_sibling_and_keeps_the_original(chat):
    q = chat.append("user", "What is 2+2?")
    chat.append("assistant", "4")
    edited = chat.edit(q.id, "What is 3+3?")
    assert edited.parent_id is None and edited.role == "user"
    assert chat.head == edited
    assert chat.tree.sibling_index(edited.id) == (2, 2)
    assert texts(chat.tree.siblings(q.id)) == ["What is 2+2?", "What is 3+3?"]
    assert len(chat.tree) == 3  # nothing was replaced


def test_regenerate_is_a_fork_under_the_question(chat):
    q = chat.append("user", "Tell a joke")
    first = chat.append("assistant", "joke one")
    second = chat.append("assistant", "joke two", parent_id=q.id)
    assert chat.tree.sibling_index(second.id) == (2, 2)
    assert chat.head == second
    assert [m.id for m in chat.tree.leaves()] == [first.id, second.id]


def test_select_resumes_the_branch_last_seen(chat):
    q = chat.append("user", "Q")
    a1 = chat.append("assistant", "A1")
    deep = chat.append("user", "follow-up on A1")
    a2 = chat.append("assistant", "A2", parent_id=q.id)
    assert chat.head == a2
    assert chat.select(a1.id) == deep  # back to A1 resumes its follow-up
    assert chat.head == deep
    assert chat.select(q.id) == deep  # the question now remembers the A1 branch
    chat.select(a2.id)
    assert chat.select(q.id) == a2
    assert reopened(chat).head == a2
    assert reopened(chat).tree.resume_leaf(a1.id) == deep


def test_sibling_paging_is_clamped_and_selects_the_branch(chat):
    q = chat.append("user", "Q")
    a1 = chat.append("assistant", "A1")
    a1_more = chat.append("user", "more")
    a2 = chat.append("assistant", "A2", parent_id=q.id)
    a3 = chat.append("assistant", "A3", parent_id=q.id)
    assert chat.sibling(a3.id, -1) == a2 and chat.head == a2
    assert chat.sibling(a2.id, -5) == a1 and chat.head == a1_more
    assert chat.sibling(a1.id, +10) == a3 and chat.head == a3
    assert chat.sibling(a3.id, 0) == a3
    assert chat.tree.sibling_index(chat.sibling(a3.id, -2).id) == (1, 3)


def test_rewind_moves_the_head_without_deleting(chat):
    q = chat.append("user", "Q")
    chat.append("assistant", "A")
    chat.append("user", "Q2")
    chat.rewind(q.id)
    assert chat.head == q and len(chat.tree) == 3
    assert reopened(chat).head == q
    branch = chat.append("assistant", "another answer")
    assert branch.parent_id == q.id and chat.tree.sibling_index(branch.id) == (2, 2)


def test_append_with_explicit_parent_none_starts_a_new_root(chat):
    chat.append("user", "first")
    root2 = chat.append("user", "second root", parent_id=None)
    assert root2.parent_id is None and len(chat.tree.roots()) == 2


def test_delete_subtree_moves_the_head_to_the_remembered_branch(chat):
    q = chat.append("user", "Q")
    a1 = chat.append("assistant", "A1")
    a1_more = chat.append("user", "A1 follow-up")
    a2 = chat.append("assistant", "A2", parent_id=q.id)
    a2_more = chat.append("user", "A2 follow-up")
    chat.select(a1.id)
    chat.select(a2.id)  # q now remembers A2
    assert chat.delete_subtree(a2.id) == 2
    assert chat.head == a1_more  # q's remembered branch is gone; newest remaining child wins
    assert a2.id not in chat.tree and a2_more.id not in chat.tree
    assert reopened(chat).head == a1_more


def test_delete_outside_the_active_branch_keeps_the_head(chat):
    q = chat.append("user", "Q")
    a1 = chat.append("assistant", "A1")
    a2 = chat.append("assistant", "A2", parent_id=q.id)
    assert chat.delete_subtree(a1.id) == 1
    assert chat.head == a2


def test_delete_to_the_parent_when_nothing_is_left_below(chat):
    q = chat.append("user", "Q")
    chat.append("assistant", "A")
    chat.delete_subtree(chat.head.id)
    assert chat.head == q
    assert chat.delete_subtree(q.id) == 1
    assert chat.head is None and chat.session.active_leaf_id is None
    assert len(reopened(chat).tree) == 0


def test_session_without_a_head_resumes_the_newest_branch(store):
    session = store.create_session()
    root = store.add_message(session.id, None, "user", "Q")
    store.add_message(session.id, root.id, "assistant", "old")
    newest = store.add_message(session.id, root.id, "assistant", "new")
    assert Conversation(store, session.id).head == newest


def test_unknown_ids_raise_tree_errors(chat):
    chat.append("user", "Q")
    for call in (lambda: chat.select(77), lambda: chat.sibling(77, 1), lambda: chat.rewind(77),
                 lambda: chat.edit(77, "x"), lambda: chat.delete_subtree(77),
                 lambda: chat.append("user", "x", parent_id=77)):
        with pytest.raises(TreeError, match="no message 77"):
            call()
    assert len(reopened(chat).tree) == 1


def test_a_draft_saved_by_its_first_message_keeps_its_record_for_a_failing_store(store, monkeypatch):
    """``session`` falls back on the copy last read when the store fails; a chat that was a
    draft until its first message must have one too, or showing it fails right after."""
    from sessions.controller.conversation import SessionDraft
    from sessions.store import DatabaseReplaced

    chat = Conversation(store, None, draft=SessionDraft(system_prompt="be brief"))
    chat.append("user", "Q1")

    def replaced(*_args, **_kwargs):
        raise DatabaseReplaced("the database file was replaced")

    monkeypatch.setattr(store, "get_session", replaced)
    assert chat.session is not None and chat.session.id == chat.session_id
