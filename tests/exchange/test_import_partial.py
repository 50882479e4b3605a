"""An export with broken entries imports every readable conversation and names the others.

The fixture is a ChatGPT ``conversations.json`` of four conversations as a real export
has them: the second lost its ``mapping`` (as an interrupted sync leaves it), the fourth
has a node whose author is a string. The first and third must come in whole, exactly
as from a file holding only them; the others are skipped, each named on one line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessions.exchange import ExchangeError, import_file
from tests.cli_support import run

DATA = Path(__file__).resolve().parents[1] / "data" / "exchange"
BROKEN = DATA / "chatgpt_conversations_broken.json"
SKIPPED = [
    "not imported: conversation 2 ('Lost in a sync') has no 'mapping' of messages",
    "not imported: conversation 4 ('Half written'): node ",
]


def contents(store, ids: list[int]) -> list[tuple[str, list[tuple[str, str]]]]:
    return [(store.get_session(i).title, [(m.role, m.text) for m in store.messages(i)]) for i in ids]


def test_the_readable_conversations_come_in_whole_and_the_others_are_named(store):
    imported = import_file(store, BROKEN)
    assert [store.get_session(i).title for i in imported] == ["Capitals of Europe", "Weather and a picture"]
    lines = [skipped.line() for skipped in imported.skipped]
    assert len(lines) == 2 and lines[0] == SKIPPED[0]
    assert lines[1].startswith(SKIPPED[1]) and lines[1].endswith("'author' should be an object, found a string")
    clean = import_file(store, DATA / "chatgpt_conversations.json")  # the same two, from a file with no damage
    assert clean.skipped == () and contents(store, imported) == contents(store, clean)


def test_a_file_with_no_readable_conversation_is_refused_and_writes_nothing(store, tmp_path):
    data = json.loads(BROKEN.read_text())
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([data[1], data[3]]))
    with pytest.raises(ExchangeError, match=r"^conversations.json: none of its 2 conversations can be read; "
                                            r"the first: conversation 1 \('Lost in a sync'\) has no 'mapping'"):
        import_file(store, path)
    assert store.list_sessions() == []


def test_a_web_ui_export_skips_an_entry_that_is_not_a_conversation(store, tmp_path):
    data = json.loads((DATA / "llamacpp_webui_all.json").read_text())
    path = tmp_path / "webui.json"
    path.write_text(json.dumps([*data, "not a conversation"]))
    imported = import_file(store, path)
    assert len(imported) == len(data)
    assert [s.line() for s in imported.skipped] == [f"not imported: conversation {len(data) + 1} is not an object"]


def test_llamachat_import_says_what_was_skipped_and_ends_with_status_1(capsys, store):
    code, out, err = run(capsys, "import", str(BROKEN))
    assert code == 1
    assert out.splitlines() == ["Imported session 1: “Capitals of Europe”.",
                                "Imported session 2: “Weather and a picture”."]
    lines = err.splitlines()
    assert len(lines) == 3
    assert lines[0] == f"llamachat: {SKIPPED[0]}" and lines[1].startswith(f"llamachat: {SKIPPED[1]}")
    assert lines[2] == "llamachat: imported 2 of 4 conversations; 2 could not be read (above) and were skipped"
    assert sorted(s.title for s in store.list_sessions()) == ["Capitals of Europe", "Weather and a picture"]


def test_a_whole_export_still_ends_with_status_0(capsys, store):
    code, out, err = run(capsys, "import", str(DATA / "chatgpt_conversations.json"), "--ids")
    assert (code, out.split(), err) == (0, ["1", "2"], "")
