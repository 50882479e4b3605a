"""Gestures act on what the user saw, even with another process writing the same chat.

``append_message`` commits only on the head the caller built on, ``delete_subtree``
deletes only the messages the user was asked about, and ``load_session_tree`` never
returns a head its tree does not hold. The other process is real (``tests.store_child``),
and each step is synchronised through its pipes.
"""

from __future__ import annotations

import pytest

from sessions.store import HeadMoved, ParentGone, SessionStore, StoreError, SubtreeChanged
from tests.store_child import StoreProcess


@pytest.fixture
def db(tmp_path):
    return tmp_path / "sessions.sqlite3"


def chain(store: SessionStore, session_id: int, *texts: str) -> list[int]:
    head = store.get_session(session_id).active_leaf_id
    ids = []
    for i, text in enumerate(texts):
        head = store.append_message(session_id, head, "user" if i % 2 == 0 else "assistant", text,
                                    expected_head=head).id
        ids.append(head)
    return ids


# -- appends ---------------------------------------------------------------------------


def test_append_moves_the_head_and_remembers_the_path(db):
    with SessionStore.open(db) as store:
        session = store.create_session()
        q, a = chain(store, session.id, "question", "answer")
        edit = store.append_message(session.id, None, "user", "edited question", expected_head=a)
        assert store.get_session(session.id).active_leaf_id == edit.id
        assert store.remembered_children(session.id) == {None: edit.id, q: a}
        back = store.append_message(session.id, q, "assistant", "another answer", expected_head=edit.id)
        assert store.remembered_children(session.id) == {None: q, q: back.id}
        session_row, tree = store.load_session_tree(session.id)
        assert session_row.active_leaf_id == back.id and back.id in tree


def test_append_on_a_head_that_moved_writes_nothing(db):
    with SessionStore.open(db) as store:
        session = store.create_session()
        (q,) = chain(store, session.id, "question")
        before = store.messages(session.id)
        with pytest.raises(HeadMoved, match="the chat changed in another window: session .* is now at "
                                            f"message {q}, not empty"):
            store.append_message(session.id, None, "user", "stale", expected_head=None)
        assert store.messages(session.id) == before
        assert store.get_session(session.id).active_leaf_id == q


def test_append_under_a_deleted_parent_writes_nothing(db):
    with SessionStore.open(db) as store:
        session = store.create_session()
        q, a = chain(store, session.id, "question", "answer")
        store.delete_subtree(a)
        with pytest.raises(ParentGone, match=f"message {a} of session .* was deleted"):
            store.append_message(session.id, a, "user", "follow-up", expected_head=q)
        assert [m.id for m in store.messages(session.id)] == [q]


def test_another_process_appending_first_makes_a_stale_append_fail(db):
    with SessionStore.open(db) as store:
        session = store.create_session()
        (q,) = chain(store, session.id, "question")
        seen, _ = store.load_session_tree(session.id)  # this window shows the chat ending at q
        with StoreProcess(db) as other:
            assert other("open")["ok"]
            answer = other("append", session=session.id, parent=q, role="assistant", text="their answer",
                           expected_head=q)
            assert answer["ok"]
            mine = other("append", session=session.id, parent=q, role="assistant", text="late",
                         expected_head=q)
            assert mine["error"] == "HeadMoved"  # the same stale view from the other side
        with pytest.raises(HeadMoved):
            store.append_message(session.id, q, "assistant", "my answer", expected_head=seen.active_leaf_id)
        assert [m.text for m in store.messages(session.id)] == ["question", "their answer"]


def test_the_tree_and_its_head_are_read_together_while_another_process_appends(db):
    """Reads go on until the writer's 400 appends are done; some must have landed in the
    middle of them (a tree neither empty nor whole), or the test proved nothing. On a
    2-core development machine the appends took a few tenths of a second and hundreds of
    reads fell among them."""
    count = 400
    with SessionStore.open(db) as store:
        session = store.create_session()
        with StoreProcess(db) as writer:
            assert writer("open")["ok"]
            writer.send("append_many", session=session.id, count=count, text="m", expected_head=None)
            sizes = []
            while not writer.answered() or len(sizes) < 50:
                found, tree = store.load_session_tree(session.id)
                head = found.active_leaf_id
                assert head is None or head in tree, f"head {head} is not in a tree of {len(tree)} messages"
                sizes.append(len(tree))
            done = writer.receive()
        assert done["ok"] and len(store.load_session_tree(session.id)[1]) == count
    assert any(0 < size < count for size in sizes), "no read overlapped the appends"


# -- deleting a branch -----------------------------------------------------------------


def test_delete_refuses_when_the_branch_changed_since_the_user_saw_it(db):
    with SessionStore.open(db) as store:
        session = store.create_session()
        q, a, q2 = chain(store, session.id, "question", "answer", "more")
        shown = {a, q2}  # the dialog said "delete 2 messages"
        with StoreProcess(db) as other:
            assert other("open")["ok"]
            assert other("append", session=session.id, parent=q2, role="assistant", text="theirs",
                         expected_head=q2)["ok"]
        with pytest.raises(SubtreeChanged, match="now holds 3 message\\(s\\), not 2 \\(1 message\\(s\\) added\\)"):
            store.delete_subtree(a, expected_ids=shown)
        assert len(store.messages(session.id)) == 4  # nothing deleted
        _, tree = store.load_session_tree(session.id)
        now = {a} | {m.id for m in tree.descendants(a)}
        assert store.delete_subtree(a, expected_ids=now) == 3
        assert [m.id for m in store.messages(session.id)] == [q]
        assert store.get_session(session.id).active_leaf_id == q


def test_delete_by_another_process_of_part_of_the_branch_is_seen(db):
    with SessionStore.open(db) as store:
        session = store.create_session()
        q, a, q2, a2 = chain(store, session.id, "q", "a", "q2", "a2")
        with StoreProcess(db) as other:
            assert other("open")["ok"]
            assert other("delete_subtree", message=a2, expected_ids=[a2]) == {"ok": True, "count": 1}
            stale = other("delete_subtree", message=q2, expected_ids=[q2, a2])
        assert stale["error"] == "SubtreeChanged" and "1 removed" in stale["message"]
        assert [m.id for m in store.messages(session.id)] == [q, a, q2]


def test_ids_the_database_cannot_hold_are_simply_not_found(db):
    with SessionStore.open(db) as store:
        for huge in (2**63, -(2**63) - 1, 10**30):
            with pytest.raises(StoreError, match=f"no session {huge}"):
                store.get_session(huge)
            with pytest.raises(StoreError, match=f"no message {huge}"):
                store.delete_subtree(huge)
