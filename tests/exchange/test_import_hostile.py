"""Imported files that try to forge tokens or crash the import, and hostile command lines.

A file from elsewhere is untrusted: its token ids are never kept (the model must read the
text on screen, nothing else), and any malformed value (wrong types, NaN or absurd
times, lone surrogates, nesting 200,000 deep) ends as one sentence naming the file and
the field, with the database exactly as it was. A seeded random mutator then throws a
few hundred broken variants of real exports at the importers to hold that for cases
nobody thought of.
"""

from __future__ import annotations

import copy
import json
import math
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from sessions.exchange import ExchangeError, export_json, export_markdown, import_data, import_file
from sessions.store import InvalidValue, SessionStore, StoreError
from tests.store_child import REPO

DATA = Path(__file__).parents[1] / "data" / "exchange"


def our_export(store: SessionStore) -> dict:
    session = store.create_session(title="Capitals")
    q = store.append_message(session.id, None, "user", "What is the capital of France?", expected_head=None)
    store.append_message(session.id, q.id, "assistant", "Paris.", expected_head=q.id)
    store.set_tokens(q.id, "a-real-fingerprint", [1, 2, 3])
    data = export_json(store, session.id)
    store.delete_session(session.id)
    return data


def database_rows(store: SessionStore) -> list:
    """Everything in the database, to compare before and after a refused import."""
    conn = sqlite3.connect(store.path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return [sorted(conn.execute(f"SELECT * FROM {table}")) for table in
                ("sessions", "messages", "message_tokens", "remembered_children", "sqlite_sequence")]
    finally:
        conn.close()


# -- token ids from a file are never trusted ------------------------------------------


@pytest.mark.parametrize("forged", [[-7], [10**9], [1, 2, 3, 4, 5]])
def test_imported_token_ids_are_dropped(store, forged):
    data = our_export(store)
    for message in data["messages"]:
        message["tokens"] = {"a-real-fingerprint": forged}
    [session_id] = import_data(store, data)
    assert store.session_tokens(session_id) == {}
    assert [m.text for m in store.messages(session_id)] == ["What is the capital of France?", "Paris."]


def test_the_store_never_holds_negative_token_ids(store):
    session = store.create_session()
    message = store.add_message(session.id, None, "user", "hi")
    with pytest.raises(StoreError, match="token ids cannot be negative"):
        store.set_tokens(message.id, "fp", [5, -7])
    assert store.get_tokens(message.id, "fp") is None


# -- malformed files: one sentence, nothing written -------------------------------------


def chatgpt() -> list:
    return json.loads((DATA / "chatgpt_conversations.json").read_text())


def first_message_node(data: list) -> dict:
    return next(node for node in data[0]["mapping"].values()
                if node.get("message") and node["message"]["author"]["role"] == "user")


def webui() -> dict:
    return json.loads((DATA / "llamacpp_webui_single.json").read_text())


def _author_string(data):
    first_message_node(data)["message"]["author"] = "user"


def _author_true(data):
    first_message_node(data)["message"]["author"] = True


def _children_number(data):
    first_message_node(data)["children"] = 5


def _parts_number(data):
    first_message_node(data)["message"]["content"]["parts"] = 7


def _chatgpt_nan_time(data):
    first_message_node(data)["message"]["create_time"] = math.nan


def _webui_timings(data):
    next(m for m in data["messages"] if m.get("role") == "assistant")["timings"] = {"predicted_n": "many"}


def _webui_huge_time(data):
    next(m for m in data["messages"] if m.get("role") == "user")["timestamp"] = 1e300


def _ours_nan_time(data):
    data["messages"][0]["created_at"] = math.nan


def _ours_time_far_away(data):
    data["messages"][0]["created_at"] = 1e300


def _ours_surrogate(data):
    data["messages"][0]["text"] = "half a pair: \ud800"


def _ours_surrogate_title(data):
    data["session"]["title"] = "\udcff"


def _ours_sampling_nan(data):
    data["session"]["sampling"]["temperature"] = math.nan


def _ours_sampling_huge(data):
    data["session"]["sampling"]["top_k"] = 10**20


def _ours_stats_text(data):
    data["messages"][1]["stats"] = {"tokens_generated": "lots"}


CASES = [
    ("chatgpt", _author_string, "'author' should be an object, found a string"),
    ("chatgpt", _author_true, "'author' should be an object, found a boolean"),
    ("chatgpt", _children_number, "'children' should be a list, found a whole number"),
    ("chatgpt", _parts_number, "'content.parts' should be a list, found a whole number"),
    ("chatgpt", _chatgpt_nan_time, "'create_time' is not a usable number (nan)"),
    ("webui", _webui_timings, "'timings.predicted_n' should be a number, found a string"),
    ("webui", _webui_huge_time, "is not a valid time"),
    ("ours", _ours_nan_time, "message 1: 'created_at' is not a usable number (nan)"),
    ("ours", _ours_time_far_away, "is not a valid time (1e+300"),
    ("ours", _ours_surrogate, "the text of message 1 is not valid Unicode text"),
    ("ours", _ours_surrogate_title, "the title is not valid Unicode text"),
    ("ours", _ours_sampling_nan, "the sampling setting 'temperature' must be a finite number"),
    ("ours", _ours_sampling_huge, "the sampling setting 'top_k' must be at most 2147483647"),
    ("ours", _ours_stats_text, "'stats.tokens_generated' should be a number, found a string"),
]


@pytest.mark.parametrize(("kind", "mutate", "words"), CASES, ids=[c[1].__name__.strip("_") for c in CASES])
def test_a_malformed_import_is_one_sentence_and_changes_nothing(store, tmp_path, kind, mutate, words):
    # the damaged conversation alone: beside readable ones it is skipped (test_import_partial)
    data = {"chatgpt": lambda: chatgpt()[:1], "webui": webui, "ours": lambda: our_export(store)}[kind]()
    mutate(data)
    path = tmp_path / "import.json"
    path.write_text(json.dumps(data), encoding="utf-8", errors="surrogatepass")
    before = database_rows(store)
    with pytest.raises(ExchangeError) as refused:
        import_file(store, path)
    message = str(refused.value)
    assert message.startswith("import.json: ") and "\n" not in message
    assert words in message
    assert database_rows(store) == before


def test_json_nested_200000_deep_is_refused_in_a_sentence(store, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ExchangeError, match="deep.json is nested too deeply to be a chat export"):
        import_file(store, path)
    assert store.list_sessions() == []


def test_the_command_line_reports_a_malformed_import_on_one_line(tmp_path):
    data = chatgpt()[:1]
    _author_string(data)
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(data))
    done = subprocess.run([sys.executable, "-m", "sessions.cli", "import", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("llamachat: error: conversations.json: conversation 1")
    assert done.stderr.count("\n") == 1 and "unexpected" not in done.stderr


def test_the_store_refuses_values_that_would_break_show_and_export(store):
    session = store.create_session()
    for bad in (math.nan, math.inf, -1.0, 1e300):
        with pytest.raises(InvalidValue, match="is not a valid time"):
            store.add_message(session.id, None, "user", "hi", created_at=bad)
    with pytest.raises(InvalidValue, match="not valid Unicode"):
        store.add_message(session.id, None, "user", "bytes that were not UTF-8: \udcff")
    with pytest.raises(InvalidValue, match="not valid Unicode"):
        store.rename_session(session.id, "\ud800")
    assert store.messages(session.id) == []


# -- a seeded fuzzer over real exports ----------------------------------------------------

ODD_VALUES = [None, True, 0, -1, 7, 2**64, 10**400, 1e308, math.nan, math.inf, -math.inf, "", "x",
              "\ud800", "\x1b[2J", [], [1], {}, {"a": 1}]


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, prefix + (index,))


def mutate(data, rng: random.Random):
    """One to three random changes: a value replaced, a key dropped, or a value nested deep."""
    data = copy.deepcopy(data)
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(list(_paths(data))[1:])
        parent = data
        for step in path[:-1]:
            parent = parent[step]
        roll = rng.random()
        if roll < 0.7:
            parent[path[-1]] = copy.deepcopy(rng.choice(ODD_VALUES))
        elif roll < 0.85 and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            nested = parent[path[-1]]
            for _ in range(rng.choice((3, 50))):
                nested = [nested]
            parent[path[-1]] = nested
    return data


def test_fuzzed_imports_either_work_fully_or_fail_in_one_sentence(store):
    rng = random.Random(14)
    seeds = [chatgpt(), webui(), json.loads((DATA / "llamacpp_webui_all.json").read_text()), our_export(store)]
    outcomes = {"imported": 0, "refused": 0}
    for _ in range(300):
        data = mutate(rng.choice(seeds), rng)
        before = database_rows(store)
        try:
            created = import_data(store, data)
        except (ExchangeError, StoreError) as error:
            message = str(error)
            assert message and "\n" not in message, message
            assert database_rows(store) == before, f"a refused import changed the database: {message}"
            outcomes["refused"] += 1
            continue
        for session_id in created:  # what went in must show and export
            export_markdown(store, session_id, whole_tree=True)
            json.dumps(export_json(store, session_id), allow_nan=False)
        outcomes["imported"] += 1
    assert outcomes["imported"] > 30 and outcomes["refused"] > 30, outcomes
