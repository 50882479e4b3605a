"""A deleted message (with what follows it) or a deleted chat comes back, whole, while the
app runs; and a deletion made final stays deleted, through a recovery too."""

from __future__ import annotations

import sqlite3
from dataclasses import replace

import pytest

from sessions.api.chat import SessionController
from sessions.controller.undo_deletes import DeletionUndo
from sessions.store import NothingToUndo, SessionStore
from sessions.tree import GenerationStats
from tests.tui.fake_engine import FakeEngineFactory


def everything(store: SessionStore, session_id: int) -> tuple:
    """All a chat holds: its row (but when it last changed), messages, tokens, remembered
    children, and the search index."""
    session, tree = store.load_session_tree(session_id)
    session = replace(session, updated_at=0.0)
    tokens = {m.id: store.get_tokens(m.id, "model") for m in tree.messages()}
    return (session, sorted(tree.messages(), key=lambda m: m.id), tokens, store.remembered_children(session_id),
            [hit.message_id for hit in store.search("zebra")])


def chat(store: SessionStore) -> tuple[int, dict[str, int]]:
    """system - user - (reply a - user - reply, reply b): two branches, the head on reply a's."""
    session = store.create_session(title="Zebras and more")
    ids = {}
    ids["system"] = store.add_message(session.id, None, "system", "Be brief.").id
    ids["user"] = store.add_message(session.id, ids["system"], "user", "Tell me of zebras.").id
    stats = GenerationStats(tokens_generated=3, sampled_by="model")
    ids["a"] = store.add_message(session.id, ids["user"], "assistant", "Zebra stripes.", stats=stats,
                                 tokens={"model": [1, 2, 3]}).id
    ids["b"] = store.add_message(session.id, ids["user"], "assistant", "Striped horses.", stats=stats,
                                 tokens={"model": [4, 5]}).id
    ids["more"] = store.add_message(session.id, ids["a"], "user", "And a zebra foal?").id
    ids["leaf"] = store.add_message(session.id, ids["more"], "assistant", "Also striped.").id
    store.set_active_leaf(session.id, ids["leaf"], remember={ids["user"]: ids["a"]})
    return session.id, ids


def deletions(store: SessionStore) -> list[tuple]:
    with sqlite3.connect(store.path) as conn:
        return conn.execute("SELECT kind, target FROM deletions").fetchall()


def test_a_deleted_branch_comes_back_whole(store):
    session_id, ids = chat(store)
    before = everything(store, session_id)
    deleted = store.delete_subtree_kept(ids["a"])
    assert deleted.count == 3 and deletions(store) == [("subtree", ids["a"])]
    assert ids["a"] not in store.load_tree(session_id)
    store.put_back(deleted)
    assert everything(store, session_id) == before
    assert deletions(store) == []  # a recovery from an older backup will not delete it again


def test_a_deleted_chat_comes_back_whole(store):
    session_id, _ = chat(store)
    before = everything(store, session_id)
    deleted = store.delete_session_kept(session_id)
    assert [s.id for s in store.list_sessions()] == []
    store.put_back(deleted)
    assert everything(store, session_id) == before
    assert deletions(store) == []


def test_a_branch_whose_parent_went_since_cannot_come_back_and_changes_nothing(store):
    session_id, ids = chat(store)
    leaf = store.delete_subtree_kept(ids["leaf"])
    store.delete_subtree(ids["a"])  # what it hung from, for good
    before = everything(store, session_id)
    with pytest.raises(NothingToUndo, match=f"message {ids['more']}"):
        store.put_back(leaf)
    assert everything(store, session_id) == before


def test_undo_takes_back_the_newest_first_and_says_when_nothing_is_left(store):
    removed = []
    undo = DeletionUndo(store, removed.append)
    session_id, ids = chat(store)
    undo.keep(store.delete_subtree_kept(ids["leaf"]))
    undo.keep(store.delete_subtree_kept(ids["b"]))
    assert undo.latest().target == ids["b"]
    assert undo.undo().deleted.target == ids["b"] and undo.undo().deleted.target == ids["leaf"]
    assert ids["leaf"] in store.load_tree(session_id) and ids["b"] in store.load_tree(session_id)
    with pytest.raises(NothingToUndo):
        undo.undo()


def test_a_deleted_chats_files_stay_until_its_deletion_is_final(store):
    now = [0.0]
    removed = []
    undo = DeletionUndo(store, removed.append, keep_seconds=60, clock=lambda: now[0])
    session_id, _ = chat(store)
    undo.keep(store.delete_session_kept(session_id), chat="the chat's tokens")  # type: ignore[arg-type]
    assert removed == [] and undo.latest() is not None
    now[0] = 61.0  # past the time deletions are kept
    assert undo.latest() is None and removed == ["the chat's tokens"]
    undo.close()
    assert removed == ["the chat's tokens"]


def test_closing_makes_every_deletion_final(store):
    removed = []
    undo = DeletionUndo(store, removed.append)
    first, _ = chat(store)
    second, _ = chat(store)
    undo.keep(store.delete_session_kept(first), chat="first")  # type: ignore[arg-type]
    undo.keep(store.delete_session_kept(second), chat="second")  # type: ignore[arg-type]
    undo.close()
    assert removed == ["first", "second"]
    with pytest.raises(NothingToUndo):
        undo.undo()
    assert store.list_sessions() == []


def test_the_controller_brings_back_a_deleted_branch_as_it_was_shown(store):
    session_id, ids = chat(store)
    ctl = SessionController(store, engine_factory=FakeEngineFactory())
    try:
        ctl.open_session(session_id)
        shown = [m.id for m in ctl.snapshot().path]
        assert ctl.delete_subtree(ids["a"]) == 3
        assert ids["a"] not in [m.id for m in ctl.snapshot().path]
        assert ctl.deletion_to_undo().count == 3
        ctl.undo_delete()
        assert [m.id for m in ctl.snapshot().path] == shown
        assert ctl.deletion_to_undo() is None
    finally:
        ctl.close()


def test_the_controller_brings_back_a_deleted_chat_and_opens_it(store):
    session_id, ids = chat(store)
    ctl = SessionController(store, engine_factory=FakeEngineFactory())
    try:
        ctl.open_session(session_id)
        ctl.delete_session(session_id)
        assert ctl.session_id != session_id
        ctl.undo_delete()
        assert ctl.session_id == session_id and ctl.snapshot().head.id == ids["leaf"]
    finally:
        ctl.close()


def test_the_config_says_how_long_deletions_can_be_undone(tmp_path):
    from sessions.config import load_config

    (tmp_path / "good.toml").write_text("undo_minutes = 5\n")
    (tmp_path / "bad.toml").write_text('undo_minutes = "soon"\n')
    assert load_config(tmp_path / "good.toml").config.undo_minutes == 5
    bad = load_config(tmp_path / "bad.toml")
    assert bad.config.undo_minutes is None
    assert [str(p) for p in bad.problems] == [
        "line 1: undo_minutes must be a number, not a string ('soon'); using the default (unset)"]


def test_a_controller_told_to_keep_nothing_says_deletions_cannot_be_undone(store):
    kept = SessionController(store, engine_factory=FakeEngineFactory())
    final = SessionController(store, engine_factory=FakeEngineFactory(), undo_seconds=0)
    try:
        assert kept.deletions_undoable and not final.deletions_undoable
    finally:
        kept.close()
        final.close()


def test_undo_leaves_the_head_where_another_process_moved_it(store):
    """``undo.py`` said the head comes back only from where the deletion left it; it came
    back whatever another window had added there since."""
    from tests.store_child import StoreProcess

    session_id, ids = chat(store)
    ctl = SessionController(store, engine_factory=FakeEngineFactory())
    try:
        ctl.open_session(session_id)
        assert ctl.delete_subtree(ids["leaf"]) == 1  # F8 on the last reply: the head goes to its question
        with StoreProcess(store.path) as other:
            other("open")
            reply = other("append", session=session_id, parent=ids["more"], role="assistant", text="Elsewhere.",
                          expected_head=ids["more"])["id"]
            newest = other("append", session=session_id, parent=reply, role="user", text="And then?",
                           expected_head=reply)["id"]
            other("close")
        brought = ctl.undo_delete()
        assert not brought.shown
        assert store.get_session(session_id).active_leaf_id == newest
        assert ctl.snapshot().head.id == newest
        assert ids["leaf"] in ctl.snapshot().tree  # back, beside the branch shown
        assert brought.sentence() == (
            f"Brought back 1 message, as a branch beside the one shown: another window went on in this chat "
            f"since the deletion, and what it added stays shown. They follow message {ids['more']} "
            f"(message {ids['leaf']} is the first).")
    finally:
        ctl.close()


def test_undo_moves_the_head_back_when_nothing_moved_it(store):
    session_id, ids = chat(store)
    deleted = store.delete_subtree_kept(ids["a"])
    assert store.put_back(deleted) is True
    assert store.get_session(session_id).active_leaf_id == ids["leaf"]
    deleted = store.delete_subtree_kept(ids["b"])  # not on the branch shown: the head never moved
    assert store.put_back(deleted) is False
    assert store.get_session(session_id).active_leaf_id == ids["leaf"]
