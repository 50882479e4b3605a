"""Served chats are kept under a budget and an age; the app's own chats are never touched."""

from __future__ import annotations

import time

from sessions.api.chat import SessionController
from sessions.controller.reply_turn import ReplyTurns
from sessions.controller.served import served_to_clean
from sessions.engine.factory import llama_engine_factory
from sessions.store import SessionStore

DAY = 86400.0


def made(store: SessionStore, days_ago: float, *, served: bool = True) -> int:
    session = store.create_session(created_at=time.time() - days_ago * DAY, served=served)
    return session.id


def test_the_oldest_beyond_the_budget_and_those_past_the_age_go(tmp_path):
    with SessionStore.open(tmp_path / "s.sqlite3") as store:
        old, older, recent, newest = made(store, 40), made(store, 20), made(store, 5), made(store, 1)
        mine = made(store, 90, served=False)  # a chat of the app: no budget of the server's applies
        assert served_to_clean(store, keep=None, max_age=30 * DAY) == [old]
        assert served_to_clean(store, keep=2, max_age=None) == [old, older]
        assert served_to_clean(store, keep=3, max_age=10 * DAY) == [old, older]
        assert served_to_clean(store, keep=None, max_age=None) == []
        controller = SessionController(store, engine_factory=llama_engine_factory(None))
        try:
            assert controller.clean_served(keep=2, max_age=30 * DAY) == [old, older]
        finally:
            controller.close()
        assert sorted(s.id for s in store.list_sessions()) == sorted([recent, newest, mine])


def test_a_chat_another_process_is_answering_in_is_left_for_next_time(tmp_path):
    with SessionStore.open(tmp_path / "s.sqlite3") as store:
        busy, idle = made(store, 50), made(store, 45)
        other = ReplyTurns(store.path)  # another llamachat, writing a reply in the first
        assert other.take(busy)
        controller = SessionController(store, engine_factory=llama_engine_factory(None))
        try:
            assert controller.clean_served(keep=None, max_age=30 * DAY) == [idle]
            other.release()
            assert controller.clean_served(keep=None, max_age=30 * DAY) == [busy]
        finally:
            controller.close()
        assert store.list_sessions() == []


def test_a_plain_start_of_the_app_reopens_the_users_chat_not_a_served_one(tmp_path):
    with SessionStore.open(tmp_path / "s.sqlite3") as store:
        mine = store.create_session(created_at=time.time() - DAY)
        store.add_message(mine.id, None, "user", "my own question")
        served = store.create_session(served=True)
        store.add_message(served.id, None, "user", "a client's question")
        controller = SessionController(store, engine_factory=llama_engine_factory(None))
        try:
            assert controller.library.last_session_id() == mine.id
            assert [s.id for s in controller.library.list_sessions()] == [served.id, mine.id]  # listed all the same
        finally:
            controller.close()
