"""The session controller's own rules, over the fake engine (fast, no llama.cpp)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sessions.api.chat import SessionController
from sessions.errors import ControllerError, GenerationCancelled
from sessions.events import ModelLoaded, ReplyFinished, TextStreamed
from sessions.sampling import SamplingSettings
from sessions.stop_reason import StopReason
from tests.tui.fake_engine import FakeEngineFactory


class RefusesBadFiles(FakeEngineFactory):
    def __call__(self, path, settings, on_progress):
        if Path(path).name == "bad.gguf":
            raise RuntimeError("llama.cpp could not load bad.gguf")
        return super().__call__(path, settings, on_progress)


@pytest.fixture
def controller(tmp_path, store):
    events = []
    ctl = SessionController(store, engine_factory=RefusesBadFiles(), sampling=SamplingSettings(temperature=0.0),
                            listener=events.append)
    ctl.events = events
    ctl.load_model(tmp_path / "good.gguf")
    ctl.new_session(system_prompt="Be brief.")
    return ctl


def test_a_reply_is_stored_streamed_and_becomes_the_head(controller):
    user = controller.send("hello")
    reply = controller.generate_reply()
    assert reply.parent_id == user.id and controller.snapshot().head.id == reply.id
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
    assert controller.snapshot().head.role == "user"  # nothing empty was stored
    assert controller.generate_reply().role == "assistant"  # the stop was used up


def test_an_old_stop_is_forgotten_when_a_job_is_scheduled(controller):
    controller.send("hello")
    controller.cancel()  # while idle
    controller.begin_job()  # what the app does before it schedules a job
    assert controller.generate_reply().role == "assistant"


def test_refusals_are_plain_words(controller):
    with pytest.raises(ControllerError, match="empty"):
        controller.send("   ")
    with pytest.raises(ControllerError, match="user message"):
        controller.generate_reply()  # nothing to answer in a new chat
    controller.send("hello")
    system = controller.snapshot().path[0]
    with pytest.raises(ControllerError, match="only a reply, or a message of yours"):
        controller.regenerate(system.id)


def test_saved_marks_follow_the_checkpoints(controller):
    user = controller.send("hello")
    reply = controller.generate_reply()
    saved = controller.routes.saved_message_ids()
    assert {user.id, reply.id} <= saved
    edited = controller.edit(user.id, "hello again")
    assert edited.id not in controller.routes.saved_message_ids()  # never evaluated yet


def test_regenerate_answers_again_from_a_reply_or_from_its_question(controller):
    question = controller.send("hello")
    first = controller.generate_reply()
    assert controller.regenerate(first.id) == question  # the head goes back to the question
    second = controller.generate_reply()
    assert controller.regenerate(question.id) == question
    third = controller.generate_reply()
    snapshot = controller.snapshot()
    assert [m.id for m in snapshot.tree.children(question.id)] == [first.id, second.id, third.id]
    assert snapshot.head == third and snapshot.positions()[third.id] == (3, 3)


def test_tree_gestures_move_the_head_and_persist(controller, store):
    question = controller.send("hello")
    first = controller.generate_reply()
    controller.regenerate(first.id)
    second = controller.generate_reply()
    assert controller.sibling(second.id, -1) == first
    assert controller.snapshot().head == first
    assert controller.sibling(first.id, -5) == first  # clamped at the first version
    assert controller.select(second.id) == second
    assert controller.rewind(question.id) == question
    assert controller.snapshot().head == question
    assert controller.delete_subtree(second.id) == 1
    reopened = SessionController(store, engine_factory=RefusesBadFiles())
    reopened.open_session(controller.session_id)
    assert [m.id for m in reopened.snapshot().tree.children(question.id)] == [first.id]
    assert reopened.snapshot().head == question  # the rewind was stored


def test_a_snapshot_is_a_copy_the_next_gesture_does_not_change(controller):
    controller.send("hello")
    controller.generate_reply()
    before = controller.snapshot()
    controller.send("more")
    after = controller.snapshot()
    assert len(before.tree) + 1 == len(after.tree)
    assert len(before.path) + 1 == len(after.path)


def test_sessions_are_listed_searched_renamed_and_exported(controller, tmp_path):
    controller.send("a question about llamas")
    controller.generate_reply()
    assert controller.rename_session("Llamas").title == "Llamas"
    [summary] = controller.library.list_sessions()
    assert (summary.id, summary.title) == (controller.session_id, "Llamas")
    assert {hit.session_id for hit in controller.library.search_sessions("llamas")} == {controller.session_id}
    assert controller.library.last_session_id() == controller.session_id
    written = controller.export_session(tmp_path / "chat.md", "markdown")
    assert "a question about llamas" in written.read_text()


def test_context_used_counts_the_active_branch_for_the_loaded_model(controller):
    assert controller.context_used() == 0  # a new chat holds nothing yet
    controller.send("hello")
    assert controller.context_used() is None  # the system prompt and the question are not tokenized yet
    controller.generate_reply()
    snapshot = controller.snapshot()
    # the branch the reply was written on...
    assert controller.context_used() == controller.routes.plan_for().target_len
    assert controller.context_used() == len(controller.engine.live)  # ...plus the reply: what the model holds
    assert controller.routes.plan_for(snapshot.path[1].id).target_len < controller.context_used()


def test_the_context_meter_and_saved_marks_say_not_known_when_the_store_cannot_be_read(controller, monkeypatch):
    """The screen reads them without catching store errors (``tui.screens.chat_screen``)."""
    from sessions.store import DatabaseReplaced

    def replaced(*_args):
        raise DatabaseReplaced(Path("/somewhere/sessions.db"))

    controller.send("hello")
    controller.generate_reply()
    assert controller.context_used() and controller.routes.saved_message_ids()
    monkeypatch.setattr(controller._store, "session_tokens", replaced)
    assert controller.context_used() is None and controller.routes.saved_message_ids() == set()


def test_close_waits_for_the_running_job_and_closes_the_model(controller):
    script = controller.engine.script
    script.hold_after = 1  # the reply waits after its first word until it is stopped
    controller.send("hello")
    streaming = threading.Event()
    finished = []

    def listener(event):
        if isinstance(event, TextStreamed):
            streaming.set()
        elif isinstance(event, ReplyFinished):
            finished.append(event)

    controller.listener = listener
    done = []
    worker = threading.Thread(target=lambda: done.append(controller.generate_reply()))
    worker.start()
    assert streaming.wait(30)
    engine = controller.engine
    controller.close()  # stops the reply, waits for it, then closes the model
    # Before any join: the reply job (which stores the reply and says so) is over already.
    assert [event.stats.stop_reason for event in finished] == [StopReason.CANCELLED]
    assert engine.closed and controller.engine is None
    worker.join(timeout=30)
    assert not worker.is_alive() and done == [finished[0].message]
    with pytest.raises(ControllerError, match="no model"):
        controller.generate_reply()
