"""Export and import: lossless JSON, Markdown transcripts, llama.cpp web UI and ChatGPT files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessions.controller.conversation import Conversation
from sessions.exchange import (
    ExchangeError,
    detect_format,
    export_json,
    export_markdown,
    import_file,
    write_export,
)
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore, StoreError
from sessions.tree import ConversationTree, GenerationStats

DATA = Path(__file__).parents[1] / "data" / "exchange"


@pytest.fixture
def store():
    with SessionStore.open() as opened:
        yield opened


def branching_session(store: SessionStore) -> int:
    """Q ─┬─ A1 ── Q2 ── A3      plus a second top-level question R
          └─ A2 (head, with stats and tokens)
    """
    session = store.create_session(
        title="Branchy", model_path="/m/tiny.gguf", model_fingerprint="fp1",
        system_prompt="Answer briefly.", sampling=SamplingSettings(temperature=0.0, seed=7),
    )
    chat = Conversation(store, session.id)
    q = chat.append("user", "Q: what is a llama?", tokens={"fp1": [1, 2, 3]})
    chat.append("assistant", "A1: a camelid.", stats=GenerationStats(0, 3, 4, 0.1, 0.2, 20.0, "eog"))
    chat.append("user", "Q2: how tall?")
    chat.append("assistant", "A3: about 1.8 m.", tokens={"fp1": [9], "fp2": [8, 7]})
    chat.append("user", "R: unrelated question", parent_id=None)
    chat.append("assistant", "A2: a South American animal.", parent_id=q.id,
              stats=GenerationStats(3, 0, 6, 0.0, 0.05, 33.3, "length"))
    chat.append("assistant", "A2 follow-up")
    chat.rewind(chat.tree.parent(chat.head.id).id)  # head inside the tree, not at a leaf
    return session.id


def shape(store: SessionStore, session_id: int, *, with_tokens: bool = True) -> list[tuple]:
    """Everything about a session's tree except its ids, in a comparable form."""
    tree = store.load_tree(session_id)
    tokens = store.session_tokens(session_id) if with_tokens else {}
    order = {m.id: i for i, m in enumerate(_depth_first(tree))}
    session = store.get_session(session_id)
    rows = [
        (order[m.id], None if m.parent_id is None else order[m.parent_id], m.role, m.text,
         m.created_at, m.stats, tokens.get(m.id, {}))
        for m in _depth_first(tree)
    ]
    remembered = sorted((-1 if p is None else order[p], order[c]) for p, c in tree.remembered().items())
    fields = (session.title, session.model_path, session.system_prompt,
              session.sampling, session.created_at, order.get(session.active_leaf_id))
    return [fields, remembered] + rows


def _depth_first(tree: ConversationTree):
    stack = list(reversed(tree.roots()))
    while stack:
        message = stack.pop()
        yield message
        stack.extend(reversed(tree.children(message.id)))


def test_json_export_is_marked_and_serialisable(store):
    data = export_json(store, branching_session(store))
    assert data["format"] == "llamachat-session" and isinstance(data["format_version"], int)
    assert len(data["messages"]) == 7
    assert {"id", "parent", "role", "text", "created_at", "stats", "tokens"} <= set(data["messages"][0])
    assert json.loads(json.dumps(data)) == data
    assert detect_format(data) == "llamachat"


def test_json_round_trip_keeps_everything_but_token_ids_and_the_models_identity(store, tmp_path):
    original = branching_session(store)
    path = write_export(store, original, tmp_path / "export.json", "json")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert any(m["tokens"] for m in json.loads(path.read_text())["messages"])  # exported, for reference
    [copy] = import_file(store, path)
    assert copy != original
    assert shape(store, copy) == shape(store, original, with_tokens=False)
    assert store.session_tokens(copy) == {}  # computed again from the text when the chat is used
    assert store.get_session(original).model_fingerprint == "fp1"
    imported = store.get_session(copy)  # the model it names is shown, never loaded unasked
    assert imported.model_path == "/m/tiny.gguf" and imported.model_to_reopen is None
    assert Conversation(store, copy).head.text == "A2: a South American animal."


def test_an_export_over_a_readable_file_is_private_and_whole(store, tmp_path):
    session_id = branching_session(store)
    path = tmp_path / "exports" / "chat.md"
    path.parent.mkdir()
    path.write_text("an older, longer file that everyone can read\n" * 100)
    path.chmod(0o644)
    write_export(store, session_id, path, "markdown")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert path.read_text() == export_markdown(store, session_id)
    assert [p.name for p in path.parent.iterdir()] == ["chat.md"]  # no temp file left
    with pytest.raises(ExchangeError, match="does not exist"):
        write_export(store, session_id, tmp_path / "missing" / "chat.md", "markdown")


def test_markdown_active_branch(store):
    session_id = branching_session(store)
    text = export_markdown(store, session_id)
    assert text.startswith("# Branchy\n")
    assert "Answer briefly." in text and "`/m/tiny.gguf`" in text
    assert text.index("Q: what is a llama?") < text.index("A2: a South American animal.")
    for elsewhere in ("A1: a camelid.", "A3: about 1.8 m.", "R: unrelated", "A2 follow-up", "Branch "):
        assert elsewhere not in text


def test_markdown_whole_tree_marks_every_branch(store):
    session_id = branching_session(store)
    text = export_markdown(store, session_id, whole_tree=True)
    tree = store.load_tree(session_id)
    for message in tree.descendants(tree.roots()[0].id) + tree.roots():
        assert message.text in text
        assert f"(message {message.id})" in text
    q = tree.roots()[0]
    a1, a2 = tree.children(q.id)
    assert f"**Branch 1 of 2 at message {q.id}**" in text
    assert f"**Branch 2 of 2 at message {q.id}** (active)" in text
    assert "**Branch 1 of 2 at the start** (active)" in text
    assert "**Branch 2 of 2 at the start**" in text
    assert text.index(a1.text) < text.index("Branch 2 of 2 at message") < text.index(a2.text)
    assert "6 tokens, 33.3 tokens/s, stopped: length" in text


def test_chatgpt_export_keeps_every_branch(store):
    path = DATA / "chatgpt_conversations.json"
    assert detect_format(json.loads(path.read_text())) == "chatgpt"
    first, second = import_file(store, path)
    tree = store.load_tree(first)
    assert store.get_session(first).title == "Capitals of Europe"
    assert len(tree) == 7 and len(tree.leaves()) == 3
    assert [m.text for m in tree.roots()] == ["What is the capital of France?", "What is the capital of Italy?"]
    france = tree.roots()[0]
    assert [m.text for m in tree.children(france.id)] == [
        "Paris.", "The capital of France is Paris, on the Seine."]
    head = Conversation(store, first)
    assert [m.text for m in head.active_path()] == [
        "What is the capital of France?", "The capital of France is Paris, on the Seine.",
        "And how many people live there?", "About 2.1 million in the city proper."]
    assert head.active_path()[0].created_at == 1714560001.0
    # Hidden context, the tool call and the tool output are gone; the chain is intact.
    chain = Conversation(store, second).active_path()
    assert [(m.role, m.text) for m in chain] == [
        ("user", "What's the weather in Oslo right now?"),
        ("assistant", "It is 5 °C and cloudy in Oslo."),
        ("user", "[image]\nWhat animal is in this picture?"),
        ("assistant", "A cat, curled up on a blanket.")]
    assert len(store.load_tree(second)) == 4


def test_llamacpp_webui_export_all(store):
    path = DATA / "llamacpp_webui_all.json"
    assert detect_format(json.loads(path.read_text())) == "llamacpp-webui"
    haiku, clock = import_file(store, path)
    tree = store.load_tree(haiku)
    assert store.get_session(haiku).title == "Llama haiku"
    assert len(tree) == 6 and len(tree.leaves()) == 2
    [system] = tree.roots()
    assert (system.role, system.text) == ("system", "You are a poet who answers in haiku.")
    path_texts = [m.text.splitlines()[0] for m in Conversation(store, haiku).active_path()]
    assert path_texts == ["You are a poet who answers in haiku.", "Write a haiku about llamas.",
                          "High Andean air", "Now one about the animals in this list.", "Alpaca, vicuna,"]
    user_with_file = Conversation(store, haiku).active_path()[3]
    assert "[text: animals.txt]\nalpaca\nvicuna\nguanaco" in user_with_file.text
    first_reply = tree.children(tree.children(system.id)[0].id)[0]
    assert first_reply.stats == GenerationStats(
        tokens_restored=0, tokens_evaluated=31, tokens_generated=22, prompt_seconds=0.0625,
        generation_tps=50.0)
    assert first_reply.created_at == 1731600012.0
    assert [(m.role, m.text) for m in Conversation(store, clock).active_path()] == [
        ("user", "What time is it in Tokyo?"), ("assistant", "It is 05:10 in Tokyo (Saturday).")]


def test_llamacpp_webui_single_download_without_root(store):
    [session_id] = import_file(store, DATA / "llamacpp_webui_single.json")
    chat = Conversation(store, session_id)
    assert [m.role for m in chat.active_path()] == ["user", "assistant"]
    assert chat.active_path()[0].parent_id is None
    assert chat.head.stats.tokens_generated == 13


def write(tmp_path: Path, content) -> Path:
    path = tmp_path / "input.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def test_invalid_files_name_the_problem_and_leave_nothing(store, tmp_path):
    good = export_json(store, branching_session(store))
    before = len(store.list_sessions())
    broken_parent = json.loads(json.dumps(good))
    broken_parent["messages"][-1]["parent"] = 4242
    newer = dict(good, format_version=99)
    bad_role = json.loads(json.dumps(good))
    bad_role["messages"][0]["role"] = "narrator"
    chatgpt = json.loads((DATA / "chatgpt_conversations.json").read_text())[1:]  # its only conversation
    chatgpt[0]["mapping"] = "oops"
    cases = [
        ("{not json", "not valid JSON"),
        ({"hello": "world"}, "not a format llamachat can import"),
        ([], "nothing to import"),
        ({"format": "something-else"}, "unknown file format"),
        (broken_parent, "parent 4242"),
        (newer, "newer llamachat"),
        (bad_role, "unknown role 'narrator'"),
        (dict(good, messages="nope"), "'messages' should be a list, found a string"),
        (dict(good, active_leaf="4"), "'active_leaf' should be a whole number or null, found a string"),
        (chatgpt, "conversation 1 \\('Weather and a picture'\\) has no 'mapping' of messages"),
    ]
    for content, expected in cases:
        with pytest.raises(ExchangeError, match=expected):
            import_file(store, write(tmp_path, content))
        assert len(store.list_sessions()) == before
    with pytest.raises(ExchangeError, match="cannot read"):
        import_file(store, tmp_path / "missing.json")


def test_a_failure_late_in_the_import_rolls_everything_back(store, tmp_path, monkeypatch):
    good = export_json(store, branching_session(store))
    with pytest.raises(ExchangeError, match="active message 4242"):
        import_file(store, write(tmp_path, dict(good, active_leaf=4242)))
    assert len(store.list_sessions()) == 1
    real_add = SessionStore.add_messages
    calls = []

    def failing_add(self, *args, **kwargs):
        calls.append(args)
        if len(calls) == 2:  # the messages of the second conversation, the first one written
            raise StoreError("disk full")
        return real_add(self, *args, **kwargs)

    monkeypatch.setattr(SessionStore, "add_messages", failing_add)
    with pytest.raises(StoreError, match="disk full"):
        import_file(store, DATA / "llamacpp_webui_all.json")
    assert len(calls) == 2 and len(store.list_sessions()) == 1


def test_a_refused_file_is_refused_before_the_store_is_locked(store, tmp_path, monkeypatch):
    """The import's transaction holds the store's lock, which the app's reads wait for:
    everything that can refuse a file runs before it."""
    good = export_json(store, branching_session(store))
    opened = []
    real_transaction = SessionStore.transaction

    def counted(self):
        opened.append(self)
        return real_transaction(self)

    monkeypatch.setattr(SessionStore, "transaction", counted)
    with pytest.raises(ExchangeError, match="active message 4242"):
        import_file(store, write(tmp_path, dict(good, active_leaf=4242)))
    assert opened == []
    import_file(store, write(tmp_path, good))
    assert opened == [store]


def test_a_remembered_branch_under_a_parent_not_in_the_file_is_dropped(store, tmp_path):
    good = export_json(store, branching_session(store))
    first, second = (m["id"] for m in good["messages"] if m["parent"] is None)
    remembered = [{"parent": None, "child": first}, {"parent": 4242, "child": second}]
    [copy] = import_file(store, write(tmp_path, dict(good, remembered_children=remembered, active_leaf=None)))
    [top] = [m for m in store.messages(copy) if m.parent_id is None and m.text.startswith("Q:")]
    assert store.remembered_children(copy) == {None: top.id}


def test_an_imported_old_chat_keeps_its_date(store, tmp_path):
    from sessions.exchange import import_file

    written = 1_680_000_000.0  # March 2023
    data = {"format": "llamachat-session", "format_version": 1,
            "session": {"title": "old", "created_at": written, "active": 2},
            "messages": [{"id": 1, "parent": None, "role": "user", "text": "hi", "created_at": written + 1},
                         {"id": 2, "parent": 1, "role": "assistant", "text": "hello", "created_at": written + 2}]}
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    [session_id] = import_file(store, path)
    [summary] = [s for s in store.list_sessions() if s.id == session_id]
    assert summary.updated_at == written + 2  # when it was last written, not when it was imported


def test_markdown_keeps_single_line_breaks_as_hard_breaks(store):
    """A poem's lines, read in the app one under the other, joined into one line once the
    exported file was rendered: each break inside a paragraph is a hard break now."""
    session = store.create_session(title="poem", system_prompt="Answer\nin verse.")
    ask = store.add_message(session.id, None, "user", "Roses are red\nviolets are blue")
    reply = "Sugar is sweet\nand so are you.\n\n```\ncode one\ncode two\n```"
    store.add_message(session.id, ask.id, "assistant", reply)
    text = export_markdown(store, session.id)
    assert "Roses are red  \nviolets are blue\n" in text
    assert "Sugar is sweet  \nand so are you.\n" in text
    assert "```\ncode one\ncode two\n```" in text  # a code block's lines stay as they are
    assert "Answer  \nin verse." in text
