"""The session controller's own rules, over the fake engine (fast, no llama.cpp)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sessions.controller import ControllerError, GenerationCancelled, SessionController
from sessions.events import ModelLoaded, ReplyFinished, TextStreamed
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from tests.tui.fake_engine import FakeEngineFactory


class RefusesBadFiles(FakeEngineFactory):
    def __call__(self, path, settings, on_progress):
        if Path(path).name == "bad.gguf":
            raise RuntimeError("llama.cpp could not load bad.gguf")
        return super().__call__(path, settings, on_progress)


@pytest.fixture
def controller(tmp_path):
    events = []
    store = SessionStore.open()
    ctl = SessionController(store, engine_factory=RefusesBadFiles(), sampling=SamplingSettings(temperature=0.0),
                            listener=events.append)
    ctl.events = events
    ctl.load_model(tmp_path / "good.gguf")
    ctl.new_session(system_prompt="Be brief.")
    yield ctl
    store.close()


def test_a_reply_is_stored_streamed_and_becomes_the_head(controller):
    user = controller.send("hello")
    reply = controller.generate_reply()
    assert reply.parent_id == user.id and controller.conversation.head.id == reply.id
    assert reply.stats is not None and reply.stats.tokens_generated > 0
    streamed = "".join(e.text for e in controller.events if isinstance(e, TextStreamed))
    assert streamed == reply.text
    assert any(isinstance(e, ReplyFinished) and e.message.id == reply.id for e in controller.events)


def test_a_failed_load_brings_the_previous_model_back(controller, tmp_path):
    with pytest.raises(RuntimeError, match="bad.gguf"):
        controller.load_model(tmp_path / "bad.gguf")
    assert controller.engine is not None and controller.engine.info.path.name == "good.gguf"
    assert isinstance(controller.events[-1], ModelLoaded)
    controller.send("still works?")
    assert controller.generate_reply().role == "assistant"


def test_a_stop_before_the_job_starts_is_not_lost(controller):
    controller.send("hello")
    controller.cancel()  # pressed after scheduling, before the worker thread ran
    with pytest.raises(GenerationCancelled):
        controller.generate_reply()
    assert controller.conversation.head.role == "user"  # nothing empty was stored
    assert controller.generate_reply().role == "assistant"  # the stop was used up


def test_an_old_stop_is_forgotten_when_a_job_is_scheduled(controller):
    controller.send("hello")
    controller.cancel()  # while idle
    controller.reset_cancel()  # what the app does before it schedules a job
    assert controller.generate_reply().role == "assistant"


def test_refusals_are_plain_words(controller):
    with pytest.raises(ControllerError, match="empty"):
        controller.send("   ")
    with pytest.raises(ControllerError, match="user message"):
        controller.generate_reply()  # the head is the system message
    user = controller.send("hi")
    with pytest.raises(ControllerError, match="only a reply"):
        controller.regenerate_point(user.id)


def test_saved_marks_follow_the_checkpoints(controller):
    user = controller.send("hello")
    reply = controller.generate_reply()
    saved = controller.saved_message_ids()
    assert {user.id, reply.id} <= saved
    edited = controller.edit(user.id, "hello again")
    assert edited.id not in controller.saved_message_ids()  # never evaluated yet
