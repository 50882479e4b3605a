"""A row whose JSON columns were damaged (by a bad disk, or by hand) is refused in words.

The sampling settings of a session and the statistics of a reply are JSON the store
writes itself. Damaged, they must not surface as a bare ``ValueError`` (the front ends
would call it a bug, and the app would meet it again at every start while reopening the
last chat): reading them raises the store's ``DatabaseDamaged``, a ``StoreError`` with
one sentence, and the other sessions read as before. The rows are damaged for real, with
SQL on the file, not by patching the store.
"""

from __future__ import annotations

import sqlite3

import pytest

from sessions import paths
from sessions.api.chat import SessionController
from sessions.store import SessionStore, StoreError
from sessions.store.errors import DatabaseDamaged
from sessions.tree import GenerationStats
from tests.cli_support import assert_one_line_error, run
from tests.tui.fake_engine import FakeEngineFactory


def two_sessions() -> tuple[int, int, int]:
    """Two saved sessions of a question and a reply each: (damaged-to-be, healthy, its reply)."""
    with SessionStore.open() as store:
        ids = []
        for title in ("to damage", "healthy"):
            session = store.create_session(title=title)
            question = store.add_message(session.id, None, "user", "hello")
            reply = store.add_message(session.id, question.id, "assistant", "hi",
                                      stats=GenerationStats(tokens_generated=1))
            ids.append((session.id, reply.id))
    return ids[0][0], ids[1][0], ids[0][1]


def damage(sql: str, *values: object) -> None:
    with sqlite3.connect(paths.database_file()) as conn:
        conn.execute(sql, values)
    conn.close()


@pytest.mark.parametrize("stored", ["{not json", "[1, 2]", '{"temperature": "hot"}', '{"top_k": 1e999}',
                                    '{"top_k": [1]}', "7"])
def test_damaged_sampling_settings_are_the_store_error_in_one_sentence(stored):
    damaged, healthy, _ = two_sessions()
    damage("UPDATE sessions SET sampling = ? WHERE id = ?", stored, damaged)
    with SessionStore.open() as store:
        with pytest.raises(DatabaseDamaged) as caught:
            store.get_session(damaged)
        assert str(caught.value).startswith(
            f"the session database is damaged: the sampling settings of session {damaged} cannot be read (")
        assert "\n" not in str(caught.value)
        with pytest.raises(StoreError):
            store.load_session_tree(damaged)
        assert store.get_session(healthy).title == "healthy"  # the others read as before
        assert [s.title for s in store.list_sessions()] == ["healthy", "to damage"]


@pytest.mark.parametrize("stored", ["{oops", '{"tokens_generated": "many"}', '"a string"',
                                    '{"prompt_seconds": {"a": 1}}'])
def test_damaged_reply_statistics_are_the_store_error_in_one_sentence(stored):
    damaged, healthy, reply = two_sessions()
    damage("UPDATE messages SET stats = ? WHERE id = ?", stored, reply)
    with SessionStore.open() as store:
        with pytest.raises(DatabaseDamaged, match=f"^the session database is damaged: the statistics of "
                                                  f"message {reply} \\(session {damaged}\\) cannot be read"):
            store.load_session_tree(damaged)
        assert len(store.load_tree(healthy)) == 2


def test_reopening_a_damaged_session_is_a_refusal_not_a_crash(store):
    """The controller's open (what the app calls at start) raises what the app shows in words."""
    damaged, healthy, _ = two_sessions()
    damage("UPDATE sessions SET sampling = ? WHERE id = ?", "{not json", damaged)
    controller = SessionController(store, engine_factory=FakeEngineFactory())
    with pytest.raises(StoreError, match="is damaged"):
        controller.open_session(damaged)
    assert controller.open_session(healthy).title == "healthy"
    controller.close()


def test_the_command_line_says_it_in_one_line(capsys):
    damaged, _, _ = two_sessions()
    damage("UPDATE sessions SET sampling = ? WHERE id = ?", "{not json", damaged)
    code, out, err = run(capsys, "show", str(damaged))
    assert_one_line_error(code, out, err, f"the sampling settings of session {damaged} cannot be read")
    assert "unexpected" not in err


def test_a_damaged_session_can_still_be_deleted(capsys):
    """The way out it leaves: deleting it reads nothing of its damaged row (app and command line)."""
    damaged, healthy, _ = two_sessions()
    damage("UPDATE sessions SET sampling = ? WHERE id = ?", "{not json", damaged)
    code, out, err = run(capsys, "delete", str(damaged))
    assert (code, err) == (0, "") and out == f"deleted session {damaged}: to damage (2 messages)\n"
    with SessionStore.open() as store:
        assert [s.id for s in store.list_sessions()] == [healthy]
        store.delete_session(healthy)  # the store's own door, the one the app uses
        assert store.list_sessions() == []
