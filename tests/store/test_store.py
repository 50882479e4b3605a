"""The session store: round trips of every field, titles, deletes, tokens, search, files."""

from __future__ import annotations

import os
import stat

import pytest

from sessions import paths
from sessions.controller.library import SessionLibrary
from sessions.sampling import SamplingSettings
from sessions.store import MessageNotFound, NewMessage, SessionNotFound, SessionStore, StoreError, title_from_text
from sessions.store import search as search_queries
from sessions.tree import GenerationStats


@pytest.fixture
def store():
    with SessionStore.open() as opened:
        yield opened


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_default_location_and_private_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        with SessionStore.open() as store:
            store.add_message(store.create_session().id, None, "user", "hi")
            db = paths.database_file()
            assert store.path == db
            assert mode(db.parent) == 0o700
            for name in (db.name, db.name + "-wal", db.name + "-shm"):
                assert (db.parent / name).exists()
                assert mode(db.parent / name) == 0o600
    finally:
        os.umask(old)


def test_session_fields_round_trip(store):
    sampling = SamplingSettings(temperature=0.0, top_k=7, seed=42, max_tokens=99)
    created = store.create_session(
        title="Plans", model_path="/m/x.gguf", model_fingerprint="abc123",
        system_prompt="Be brief.", sampling=sampling,
    )
    again = store.get_session(created.id)
    assert again == created
    assert (again.title, again.model_path, again.model_fingerprint) == ("Plans", "/m/x.gguf", "abc123")
    assert again.system_prompt == "Be brief." and again.sampling == sampling
    assert again.active_leaf_id is None
    assert store.create_session().sampling == SamplingSettings()


def test_missing_ids_raise_plain_errors(store):
    with pytest.raises(SessionNotFound, match="no session 99"):
        store.get_session(99)
    with pytest.raises(MessageNotFound, match="no message 5"):
        store.get_message(5)
    for call in (lambda: store.rename_session(99, "x"), lambda: store.delete_session(99),
                 lambda: store.add_message(99, None, "user", "x"), lambda: store.messages(99)):
        with pytest.raises(SessionNotFound):
            call()


def test_title_defaults_to_first_user_message_and_stays_renameable(store):
    session = store.create_session(system_prompt="sys")
    store.add_message(session.id, None, "system", "You are terse.")
    first = store.add_message(session.id, None, "user", "\n  How do llamas sleep?  \nMore detail here")
    assert store.get_session(session.id).title == "How do llamas sleep?"
    store.add_message(session.id, first.id, "user", "A later question")
    assert store.get_session(session.id).title == "How do llamas sleep?"
    store.rename_session(session.id, "Llama sleep")
    store.add_message(session.id, first.id, "user", "Yet another")
    assert store.get_session(session.id).title == "Llama sleep"
    named = store.create_session(title="Given")
    store.add_message(named.id, None, "user", "text")
    assert store.get_session(named.id).title == "Given"


def test_title_from_long_text_is_trimmed_at_a_word():
    long = "word " * 40
    title = title_from_text(long)
    assert title.endswith("…") and len(title) <= 61
    assert not title[:-1].endswith(" ")
    assert title_from_text("x" * 100) == "x" * 60 + "…"
    assert title_from_text("   \n\n") == ""


def test_listing_order_counts_and_last_session(store):
    library = SessionLibrary(store)
    assert store.list_sessions() == [] and library.last_session_id() is None
    a = store.create_session(title="A")
    b = store.create_session(title="B")
    assert [s.id for s in store.list_sessions()] == [b.id, a.id]
    store.add_message(a.id, None, "user", "one")
    store.add_message(a.id, None, "user", "two")
    summaries = store.list_sessions()
    assert [(s.id, s.message_count) for s in summaries] == [(a.id, 2), (b.id, 0)]
    assert summaries[0].updated_at >= summaries[1].updated_at
    assert library.last_session_id() == a.id  # the newer session b has no message: passed over


def test_update_session_changes_only_given_fields(store):
    session = store.create_session(model_path="/a.gguf", system_prompt="keep me")
    updated = store.update_session(session.id, model_fingerprint="fp", sampling=SamplingSettings(top_k=3))
    assert updated.model_path == "/a.gguf" and updated.system_prompt == "keep me"
    assert updated.model_fingerprint == "fp" and updated.sampling.top_k == 3
    cleared = store.update_session(session.id, system_prompt=None)
    assert cleared.system_prompt is None and cleared.model_fingerprint == "fp"


def test_recording_a_model_does_not_re_date_the_session(store):
    """Opening a chat with a model loaded records it: the chat is not changed by that."""
    session = store.create_session(model_path="/a.gguf", created_at=1000.0)
    store.update_session(session.id, model_path="/b.gguf", model_fingerprint="fp")
    assert store.get_session(session.id).updated_at == 1000.0
    store.update_session(session.id, sampling=SamplingSettings())  # the same settings again
    assert store.get_session(session.id).updated_at == 1000.0
    store.update_session(session.id, sampling=SamplingSettings(top_k=3))
    assert store.get_session(session.id).updated_at > 1000.0


def test_message_fields_round_trip(store):
    session = store.create_session()
    stats = GenerationStats(5, 17, 9, 0.5, 0.75, 31.25, "eog")
    root = store.add_message(session.id, None, "user", "Hi 👋", created_at=1000.5)
    reply = store.add_message(session.id, root.id, "assistant", "Hello!", stats=stats,
                              tokens={"fp-a": [1, 0, 2**31 - 1], "fp-b": []})
    assert store.get_message(reply.id) == reply
    assert (reply.parent_id, reply.role, reply.text, reply.stats) == (root.id, "assistant", "Hello!", stats)
    assert store.get_message(root.id).created_at == 1000.5
    assert store.get_tokens(reply.id, "fp-a") == [1, 0, 2**31 - 1]
    assert store.get_tokens(reply.id, "fp-b") == []
    assert store.get_tokens(reply.id, "other") is None
    assert store.session_tokens(session.id) == {reply.id: {"fp-a": [1, 0, 2**31 - 1], "fp-b": []}}
    store.set_tokens(reply.id, "fp-a", [7, 8])
    assert store.get_tokens(reply.id, "fp-a") == [7, 8]
    assert store.messages(session.id) == [store.get_message(root.id), store.get_message(reply.id)]


def test_bad_messages_are_refused(store):
    one, two = store.create_session(), store.create_session()
    foreign = store.add_message(two.id, None, "user", "elsewhere")
    with pytest.raises(StoreError, match=f"belongs to session {two.id}, not session {one.id}"):
        store.add_message(one.id, foreign.id, "assistant", "x")
    with pytest.raises(StoreError, match="unknown role 'tool'"):
        store.add_message(one.id, None, "tool", "x")
    with pytest.raises(MessageNotFound):
        store.add_message(one.id, 12345, "user", "x")
    with pytest.raises(StoreError, match="32-bit"):
        store.add_message(one.id, None, "user", "x", tokens={"fp": [2**40]})
    assert store.messages(one.id) == []  # the failed add left nothing behind


def test_many_messages_go_in_at_once_with_parents_by_position(store):
    session = store.create_session()
    before = store.get_session(session.id).updated_at
    stats = GenerationStats(tokens_generated=3, stop_reason="eog")
    ids = store.add_messages(session.id, [
        NewMessage(None, "system", "be brief", created_at=1000.0),
        NewMessage(0, "user", "first question\nmore"),
        NewMessage(1, "assistant", "answer", stats=stats),
        NewMessage(1, "assistant", "another answer"),
        NewMessage(None, "user", "second question"),
    ])
    found = {m.id: m for m in store.messages(session.id)}
    assert list(found) == ids
    assert [found[i].parent_id for i in ids] == [None, ids[0], ids[1], ids[1], None]
    assert found[ids[0]].created_at == 1000.0 and found[ids[2]].stats == stats
    after = store.get_session(session.id)
    assert after.title == "first question" and after.active_leaf_id is None  # the head does not move
    assert after.updated_at >= before
    titled = store.create_session(title="mine")
    store.add_messages(titled.id, [NewMessage(None, "user", "a question")])
    assert store.get_session(titled.id).title == "mine"


@pytest.mark.parametrize(("messages", "words"), [
    ([NewMessage(None, "user", "a"), NewMessage(1, "assistant", "b")],
     "message 2 of 2 names as its parent position 1, which does not come before it"),
    ([NewMessage(None, "user", "a"), NewMessage(-1, "assistant", "b")], "position -1"),
    ([NewMessage(None, "user", "a"), NewMessage(0, "tool", "b")], "unknown role 'tool'"),
    ([NewMessage(None, "user", "half a pair: \ud800")], "not valid Unicode text"),
    ([NewMessage(None, "user", "a", created_at=float("nan"))], "is not a valid time"),
])
def test_many_messages_are_refused_together(store, messages, words):
    session = store.create_session()
    with pytest.raises(StoreError, match=words):
        store.add_messages(session.id, messages)
    assert store.messages(session.id) == []
    with pytest.raises(SessionNotFound):
        store.add_messages(session.id + 1, [NewMessage(None, "user", "a")])


def test_tree_with_remembered_children_and_active_leaf(store):
    session = store.create_session()
    a = store.add_message(session.id, None, "user", "a")
    b = store.add_message(session.id, a.id, "assistant", "b")
    c = store.add_message(session.id, a.id, "assistant", "c")
    store.set_remembered_child(session.id, a.id, b.id)
    store.set_active_leaf(session.id, b.id, remember={None: a.id})
    tree = store.load_tree(session.id)
    assert [m.id for m in tree.children(a.id)] == [b.id, c.id]
    assert tree.remembered() == {None: a.id, a.id: b.id}
    assert store.get_session(session.id).active_leaf_id == b.id
    with pytest.raises(StoreError, match="not a child of"):
        store.set_remembered_child(session.id, None, c.id)
    other = store.create_session()
    with pytest.raises(StoreError, match="belongs to session"):
        store.set_active_leaf(other.id, b.id)


def test_delete_subtree_counts_and_repairs_pointers(store):
    session = store.create_session()
    a = store.add_message(session.id, None, "user", "a")
    b = store.add_message(session.id, a.id, "assistant", "b")
    c = store.add_message(session.id, b.id, "user", "c")
    d = store.add_message(session.id, c.id, "assistant", "d")
    e = store.add_message(session.id, a.id, "assistant", "e")
    store.set_active_leaf(session.id, d.id, remember={None: a.id, a.id: b.id, b.id: c.id, c.id: d.id})
    store.set_tokens(d.id, "fp", [1, 2])
    assert store.delete_subtree(b.id) == 3
    assert [m.id for m in store.messages(session.id)] == [a.id, e.id]
    assert store.get_session(session.id).active_leaf_id == a.id
    assert store.remembered_children(session.id) == {None: a.id}
    assert store.get_tokens(d.id, "fp") is None
    assert store.delete_subtree(a.id) == 2
    assert store.get_session(session.id).active_leaf_id is None
    with pytest.raises(MessageNotFound):
        store.delete_subtree(a.id)


def test_ids_are_never_reused(store):
    session = store.create_session()
    last = store.add_message(session.id, None, "user", "x")
    store.delete_subtree(last.id)
    assert store.add_message(session.id, None, "user", "y").id > last.id


def test_delete_session_removes_everything(store):
    session = store.create_session()
    keep = store.create_session()
    m = store.add_message(session.id, None, "user", "bye", tokens={"fp": [1]})
    store.add_message(keep.id, None, "user", "stay")
    store.delete_session(session.id)
    with pytest.raises(SessionNotFound):
        store.get_session(session.id)
    with pytest.raises(MessageNotFound):
        store.get_message(m.id)
    assert [s.id for s in store.list_sessions()] == [keep.id]
    assert store.search("bye") == []


@pytest.mark.parametrize("full_text", [True, False], ids=["fts5", "like"])
def test_search_with_punctuation(store, monkeypatch, full_text):
    if not full_text:
        monkeypatch.setattr(search_queries, "has_full_text", lambda conn: False)
    cpp = store.create_session(title="Compilers")
    store.add_message(cpp.id, None, "user", "How do I write C++ templates (variadic)?")
    pets = store.create_session(title="Pets: llamas & alpacas")
    msg = store.add_message(pets.id, None, "user", "Do llamas spit? Asking for a friend.")
    for query in ('C++ (variadic)?', '"templates', "templates AND", "NEAR(", "*", "-", "C++)", "'"):
        store.search(query)  # never a syntax error
        store.list_sessions(query)
    hits = store.search("llamas spit?")
    assert [(h.session_id, h.message_id) for h in hits] == [(pets.id, msg.id)]
    assert "spit" in hits[0].snippet and hits[0].title == "Pets: llamas & alpacas"
    assert [h.session_id for h in store.search("templates (variadic")] == [cpp.id]
    title_hits = store.search("alpacas &")
    assert title_hits[0].message_id is None and title_hits[0].session_id == pets.id
    assert [s.id for s in store.list_sessions("C++ templates")] == [cpp.id]
    assert [s.id for s in store.list_sessions("compilers")] == [cpp.id]
    assert store.list_sessions("nothing-like-this") == []
    assert len(store.list_sessions("  ")) == 2
    assert store.search("") == []


@pytest.mark.parametrize("full_text", [True, False], ids=["fts5", "like"])
def test_search_finds_a_chat_whose_words_are_in_different_messages(store, monkeypatch, full_text):
    if not full_text:
        monkeypatch.setattr(search_queries, "has_full_text", lambda conn: False)
    pets = store.create_session(title="Pets and trivia")
    first = store.add_message(pets.id, None, "user", "Tell me about dogs.")
    store.add_message(pets.id, first.id, "assistant", "And cats purr.")
    other = store.create_session(title="Only dogs")
    store.add_message(other.id, None, "user", "dogs bark")
    assert [s.id for s in store.list_sessions("dogs cats")] == [pets.id]
    assert [(h.session_id, h.message_id, h.snippet) for h in store.search("dogs cats")] == [
        (pets.id, None, "Pets and trivia")]
    assert {s.id for s in store.list_sessions("dogs")} == {pets.id, other.id}


def test_search_follows_edits_and_deletes(store):
    session = store.create_session(title="Errands")
    m = store.add_message(session.id, None, "user", "ephemeral zebra")
    assert len(store.search("zebra")) == 1
    store.delete_subtree(m.id)
    assert store.search("zebra") == []
    store.rename_session(session.id, "zebra crossing")
    assert [h.message_id for h in store.search("zebra")] == [None]


def test_transaction_is_all_or_nothing(store):
    with pytest.raises(RuntimeError):
        with store.transaction():
            session = store.create_session(title="half")
            store.add_message(session.id, None, "user", "made inside")
            raise RuntimeError("stop")
    assert store.list_sessions() == []
    with store.transaction():
        session = store.create_session(title="whole")
        with pytest.raises(StoreError):
            store.add_message(session.id, None, "bogus", "x")
        store.add_message(session.id, None, "user", "kept")
    assert [s.message_count for s in store.list_sessions()] == [1]


def test_data_survives_reopening():
    with SessionStore.open() as store:
        session = store.create_session(title="persist")
        m = store.add_message(session.id, None, "user", "still here", tokens={"fp": [3]})
        store.set_active_leaf(session.id, m.id)
    with SessionStore.open() as store:
        assert store.get_session(session.id).active_leaf_id == m.id
        assert store.get_message(m.id).text == "still here"
        assert store.get_tokens(m.id, "fp") == [3]
