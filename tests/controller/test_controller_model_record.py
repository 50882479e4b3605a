"""Loading a model whose use the store cannot record: nothing leaks, the error says why.

Loading a model records it as the open chat's own (reopening the chat loads it again).
When that write is refused (here: a database that could be opened for reading only,
the store's own read-only mode, as on read-only media), the model just loaded must be
closed again, not left loaded by no one, and the store's sentence reaches the caller.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sessions.api.chat import SessionController
from sessions.store import DatabaseReadOnly, SessionStore, opening
from tests.tui.fake_engine import FakeEngineFactory


@pytest.fixture
def read_only_store(tmp_path, monkeypatch):
    """A database holding one session, opened again read-only; yields (store, session id)."""
    db = tmp_path / "sessions.sqlite3"
    with SessionStore.open(db) as store:
        session = store.create_session(title="kept", model_path="/models/old.gguf", model_fingerprint="fake-old.gguf")
        store.add_message(session.id, None, "user", "hello")

    def refused(conn, target=None):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(opening, "apply_migrations", refused)
    with SessionStore.open(db) as store:
        assert store.read_only
        yield store, session.id


def test_a_model_the_chat_cannot_record_is_closed_and_the_refusal_raised(read_only_store, tmp_path):
    store, session_id = read_only_store
    factory = FakeEngineFactory()
    controller = SessionController(store, engine_factory=factory)
    controller.new_session()  # a new chat records the model in its draft: no write
    controller.load_model(tmp_path / "first.gguf")
    controller.open_session(session_id)
    with pytest.raises(DatabaseReadOnly, match="is read-only .*nothing new can be saved"):
        controller.load_model(tmp_path / "second.gguf")
    first, second = factory.engines
    assert first.closed and second.closed  # the one before was closed for the swap; the new one too
    assert controller.engine is None and controller.model_info is None
    assert store.get_session(session_id).model_path == "/models/old.gguf"  # the record is unchanged
    controller.close()


def test_a_new_chat_on_a_read_only_database_still_loads(read_only_store, tmp_path):
    """Nothing is written for a chat not saved yet, so the refusal above is no blanket one."""
    store, _ = read_only_store
    controller = SessionController(store, engine_factory=FakeEngineFactory())
    controller.new_session()
    info = controller.load_model(tmp_path / "model.gguf")
    assert controller.model_info == info and Path(info.path).name == "model.gguf"
    controller.close()


def test_a_reopened_chat_loads_its_own_model_while_its_file_is_there(tmp_path):
    """The one rule the app and ``ask`` both follow (``ModelCatalogue.model_to_reopen``)."""
    from sessions.api.chat import ModelCatalogue

    mine, configured = tmp_path / "mine.gguf", tmp_path / "conf.gguf"
    models = ModelCatalogue()
    assert models.model_to_reopen(str(mine), str(configured)) is None  # neither file is there
    configured.write_bytes(b"x")
    assert models.model_to_reopen(str(mine), str(configured)) == configured  # the chat's is gone
    mine.write_bytes(b"x")
    assert models.model_to_reopen(str(mine), str(configured)) == mine
    assert models.model_to_reopen(None, None) is None
