"""Imports and exports at the edges: files that are not files, numbers too large for a
float, repeated ids, and another process changing the session while it is exported.

Each case used to end in a hang, a Python error or an inconsistent file; each must end
as one sentence (an ``ExchangeError``) that changes nothing, or as a consistent export.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from sessions.config.validate import TOP_RULES, check_value
from sessions.exchange import (
    MAX_IMPORT_BYTES,
    ExchangeError,
    export_json,
    export_markdown,
    import_data,
    import_file,
    write_export,
)
from sessions.store import SessionStore

DATA = Path(__file__).parents[1] / "data" / "exchange"


def two_turns(store: SessionStore) -> tuple[int, int]:
    """A session of a question and its answer (the head); returns the ids of both."""
    session = store.create_session(title="Capitals")
    q = store.append_message(session.id, None, "user", "What is the capital of France?", expected_head=None)
    a = store.append_message(session.id, q.id, "assistant", "Paris.", expected_head=q.id)
    return session.id, a.id


# -- 1. the import file must be a regular file of a sane size --------------------------


def test_an_import_from_a_fifo_is_refused_without_waiting_for_a_writer(store, tmp_path):
    fifo = tmp_path / "chat.json"
    os.mkfifo(fifo)
    outcome: list[BaseException | object] = []

    def attempt() -> None:
        try:
            outcome.append(import_file(store, fifo))
        except BaseException as error:  # noqa: BLE001 - handed to the test's thread
            outcome.append(error)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(timeout=10)  # returns at once when fixed; a bound so a regression fails, not hangs
    if worker.is_alive():  # unblock the reader so the daemon thread can end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(timeout=30)
        pytest.fail("importing a FIFO waited for a writer")
    [error] = outcome
    assert isinstance(error, ExchangeError)
    assert str(error) == "chat.json is not a regular file"
    assert store.list_sessions() == []


def test_an_import_from_a_device_is_refused(store, tmp_path):
    link = tmp_path / "null.json"
    link.symlink_to("/dev/null")
    with pytest.raises(ExchangeError, match=r"^null.json is not a regular file$"):
        import_file(store, link)


def test_an_import_of_a_folder_says_so(store, tmp_path):
    with pytest.raises(ExchangeError, match=r"^cannot read .*: Is a directory$"):
        import_file(store, tmp_path)


def test_an_import_larger_than_any_chat_export_is_refused_before_it_is_read(store, tmp_path):
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as out:  # sparse: no disk space, and never read if refused first
        out.truncate(MAX_IMPORT_BYTES + 1)
    with pytest.raises(ExchangeError, match=r"^huge.json is larger than any chat export \(more than 512 MiB\)$"):
        import_file(store, huge)
    assert store.list_sessions() == []


# -- 2. a number too large for a float is out of range, not an OverflowError -----------


@pytest.mark.parametrize("name", ["temperature", "top_p", "min_p", "repeat_penalty"])
@pytest.mark.parametrize("sign", [1, -1])
def test_a_setting_too_large_for_a_float_is_out_of_range(store, tmp_path, name, sign):
    session_id, _ = two_turns(store)
    data = export_json(store, session_id)
    store.delete_session(session_id)
    data["session"]["sampling"][name] = sign * 10**400
    path = tmp_path / "ours.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ExchangeError) as refused:
        import_file(store, path)
    words = "at most" if sign > 0 else "at least"
    assert f"ours.json: session: the sampling setting '{name}' must be {words} " in str(refused.value)
    assert "not a number of 401 digits" in str(refused.value)
    assert store.list_sessions() == []


def test_a_list_entry_too_large_for_a_float_is_refused():
    value, problem = check_value(TOP_RULES["tensor_split"], [1, 10**400])
    assert value is None and problem is not None and "finite numbers" in problem


# -- 3. an export reads the session and its tree in one read ---------------------------


def meddling(store: SessionStore, other: SessionStore, session_id: int, change: str, monkeypatch) -> None:
    """After each of ``store``'s reads, ``other`` (another process) changes the session."""

    def act() -> None:
        head = other.get_session(session_id).active_leaf_id
        if change == "delete":
            if head is not None:
                other.delete_subtree(head)
        else:
            other.append_message(session_id, head, "user", "and more", expected_head=head)

    for name in ("get_session", "messages", "remembered_children", "load_tree", "session_tokens"):
        real = getattr(store, name)

        def read(*args, _real=real, **kwargs):
            result = _real(*args, **kwargs)
            act()
            return result

        monkeypatch.setattr(store, name, read)


@pytest.mark.parametrize("change", ["delete", "append"])
def test_an_export_is_consistent_while_another_process_changes_the_session(store, change, monkeypatch):
    session_id, _ = two_turns(store)
    with SessionStore.open(store.path) as other:
        meddling(store, other, session_id, change, monkeypatch)
        data = export_json(store, session_id)
        ids = {m["id"] for m in data["messages"]}
        assert data["active_leaf"] in ids
        # One state of the session: the head it names is a leaf among the messages it has,
        # and every parent is there too (the other process only ever adds at the head or
        # deletes it).
        assert all(m["parent"] in ids | {None} for m in data["messages"])
        assert not any(m["parent"] == data["active_leaf"] for m in data["messages"])
        export_markdown(store, session_id)
        export_markdown(store, session_id, whole_tree=True)


# -- 4. an export replaces only a regular file ------------------------------------------


def test_an_export_over_a_fifo_is_refused_and_leaves_it(store, tmp_path):
    session_id, _ = two_turns(store)
    fifo = tmp_path / "out.md"
    os.mkfifo(fifo)
    with pytest.raises(ExchangeError, match=r"^cannot write .*out.md: it is not a regular file$"):
        write_export(store, session_id, fifo, "markdown")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_an_export_through_a_link_to_a_device_is_refused(store, tmp_path):
    session_id, _ = two_turns(store)
    link = tmp_path / "out.json"
    link.symlink_to("/dev/null")
    with pytest.raises(ExchangeError, match="it is not a regular file"):
        write_export(store, session_id, link, "json")
    assert os.readlink(link) == "/dev/null"


# -- 5. a repeated message id in a web UI file -----------------------------------------


def test_a_webui_message_id_that_appears_twice_is_refused(store):
    data = json.loads((DATA / "llamacpp_webui_single.json").read_text())
    first = next(m for m in data["messages"] if m.get("role") == "user")
    data["messages"].append(dict(first, content="a forged second copy"))
    with pytest.raises(ExchangeError, match=f"message id {first['id']!r} appears twice"):
        import_data(store, data)
    assert store.list_sessions() == []


@pytest.mark.parametrize("field", ["id", "parent"])
def test_an_id_no_row_can_have_is_refused_as_such(store, tmp_path, field):
    """An id of 2^70 used to be told as a parent missing from the file."""
    messages = [{"id": 1, "parent": None, "role": "user", "text": "hi"},
                {"id": 2, "parent": 1, "role": "assistant", "text": "hello"}]
    messages[1][field] = 2**70
    path = tmp_path / "chat.json"
    path.write_text(json.dumps({"format": "llamachat-session", "format_version": 1, "session": {"title": "x"},
                                "messages": messages, "active_leaf": None}))
    with pytest.raises(ExchangeError) as refused:
        import_file(store, path)
    assert str(refused.value).endswith(f"message 2: '{field}' is {2**70}, which is not an id (ids are whole "
                                       "numbers from -2^63 to 2^63 - 1)")
    assert store.list_sessions() == []


def test_an_export_onto_a_symbolic_link_writes_the_file_it_leads_to(store, tmp_path):
    """The link used to be replaced by a file."""
    from sessions.exchange import write_export

    session = store.create_session(title="kept")
    store.add_message(session.id, None, "user", "What is a llama?")
    target = tmp_path / "dotfiles" / "chat.md"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "chat.md"
    link.symlink_to(target)
    assert write_export(store, session.id, link, "markdown") == link
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert "What is a llama?" in target.read_text()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
