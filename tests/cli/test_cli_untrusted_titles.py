"""Titles printed by the command line, and ``delete`` of several ids as one unit.

Titles come from imported files written by strangers: one holding a newline must not
print a line that a person or a script reading ``llamachat sessions`` would take for a
real row. And ``delete A B`` promises all or nothing, also when it fails part-way.
"""

from __future__ import annotations

import json

import pytest

from sessions.store import SessionStore
from sessions.text_safety import one_line
from tests.cli_support import assert_one_line_error, run

FORGED = "hi\n12  2024-05-01 10:00  9 messages  forged\tcolumn\x1b[2J\r\u2028x"


def test_one_line_collapses_whitespace_and_makes_controls_inert():
    assert one_line(FORGED) == "hi 12 2024-05-01 10:00 9 messages forged column\u241b[2J x"
    assert one_line("  \n\t ") == ""
    assert one_line("bell\x07 \u202eevil") == "bell\u2407 \ufffdevil"


def test_sessions_prints_a_forged_title_as_one_row(capsys, store):
    forged = store.create_session(title=FORGED)
    store.create_session(title="plain")
    code, out, err = run(capsys, "sessions")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert len(lines) == 2, out
    row = next(line for line in lines if line.split()[0] == str(forged.id))
    assert row.endswith("0 messages  hi 12 2024-05-01 10:00 9 messages forged column\u241b[2J x")
    assert "\t" not in out and "\x1b" not in out


def test_sessions_json_keeps_the_title_exactly(capsys, store):
    store.create_session(title=FORGED)
    code, out, _ = run(capsys, "sessions", "--json")
    assert code == 0
    [entry] = json.loads(out)
    assert entry["title"] == FORGED


def test_show_rename_and_delete_print_the_title_on_one_line(capsys, store):
    session = store.create_session(title=FORGED)
    code, out, _ = run(capsys, "show", str(session.id))
    assert code == 0 and out.count("\n") == 1, out
    assert out.startswith(f"session {session.id}: hi 12 2024-05-01")
    assert json.loads(run(capsys, "show", str(session.id), "--json")[1])["session"]["title"] == FORGED

    code, out, _ = run(capsys, "rename", str(session.id), "new\nline", "\tand tab")
    assert code == 0 and out.count("\n") == 1, out
    assert out == f"renamed session {session.id}: {one_line(FORGED)} -> new line and tab\n"

    store.rename_session(session.id, FORGED)
    code, out, _ = run(capsys, "delete", str(session.id))
    assert code == 0 and out == f"deleted session {session.id}: {one_line(FORGED)} (0 messages)\n"


def test_delete_with_a_missing_id_deletes_nothing(capsys, store):
    kept = [store.create_session(title=f"s{n}").id for n in range(2)]
    missing = max(kept) + 1
    assert_one_line_error(*run(capsys, "delete", str(kept[0]), str(missing), str(kept[1])),
                          words=f"no session {missing}")
    assert {s.id for s in store.list_sessions()} == set(kept)


@pytest.mark.parametrize("failure", [KeyboardInterrupt, OSError])
def test_delete_failing_part_way_deletes_nothing(capsys, store, monkeypatch, failure):
    """The first deletion has happened (in the command's transaction) when the second
    fails: Ctrl+C, or the disk. Both must leave every session in place."""
    ids = [store.create_session(title=f"s{n}").id for n in range(3)]
    store.add_message(ids[0], None, "user", "keep me")
    deleted: list[int] = []
    delete = SessionStore.delete_session

    def failing_after_the_first(self: SessionStore, session_id: int) -> None:
        if deleted:
            raise failure("injected")
        delete(self, session_id)
        deleted.append(session_id)

    monkeypatch.setattr(SessionStore, "delete_session", failing_after_the_first)
    code, out, err = run(capsys, "delete", *map(str, ids))
    monkeypatch.setattr(SessionStore, "delete_session", delete)  # not undo(): it resets the data dir
    assert deleted == [ids[0]]
    assert code == (130 if failure is KeyboardInterrupt else 1)
    assert out == "", "nothing may be reported deleted"
    assert {s.id for s in store.list_sessions()} == set(ids)
    assert [m.text for m in store.messages(ids[0])] == ["keep me"]
    code, out, err = run(capsys, "delete", *map(str, ids))
    assert code == 0 and out.count("deleted session") == 3, err
    assert store.list_sessions() == []


def test_a_title_of_megabytes_is_cut_on_a_line_and_whole_in_json(store, capsys):
    """A 5 MB title used to be printed whole by `llamachat sessions`."""
    from sessions.cli.formatting import TITLE_WIDTH

    huge = "long " * 1_000_000
    store.create_session(title=huge)
    code, out, _err = run(capsys, "sessions")
    assert code == 0 and len(out) < 400
    assert out.rstrip("\n").endswith("…") and len(out.split("  ")[-1].strip()) == TITLE_WIDTH
    code, out, _err = run(capsys, "sessions", "--json")
    assert json.loads(out)[0]["title"] == huge
