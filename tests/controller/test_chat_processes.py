"""The controller (as the app drives it) and other processes on the same session.

The controller runs here, over the fake engine; the other processes are real: ``llamachat
ask`` over a tiny real model (``tests.ask_process``), or a bare store process
(``tests.store_child``) standing for another window. Every step is synchronised on what
the other process printed or answered, never on time.
"""

from __future__ import annotations

import threading

import pytest

from sessions.api.chat import SessionController
from sessions.controller.conversation import Conversation
from sessions.errors import ReplyNotSaved, TurnTaken
from sessions.events import TextStreamed
from sessions.sampling import SamplingSettings
from sessions.stop_reason import StopReason
from sessions.store import ChatChanged, SessionStore
from sessions.synth import make_model
from tests.ask_process import SHORT_REPLY_TOKENS, other_terminal, other_terminal_asked, printed_some_reply
from tests.store_child import StoreProcess
from tests.tui.fake_engine import FakeEngineFactory, FakeScript

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def model() -> str:
    return str(make_model("llama", "tiny"))


@pytest.fixture
def script() -> FakeScript:
    return FakeScript()


@pytest.fixture
def controller(store, tmp_path, script):
    streamed = threading.Event()

    def listen(event):
        if isinstance(event, TextStreamed):
            streamed.set()

    ctl = SessionController(store, engine_factory=FakeEngineFactory(script),
                            sampling=SamplingSettings(temperature=0.0), listener=listen)
    ctl.streamed = streamed
    ctl.load_model(tmp_path / "fake.gguf")
    ctl.new_session()
    ctl.send("a first question")
    ctl.generate_reply()
    yield ctl
    ctl.close()


def user_under_user(store: SessionStore, session_id: int) -> list[int]:
    tree = store.load_tree(session_id)
    return [m.id for m in store.messages(session_id)
            if m.role == "user" and m.parent_id is not None and tree.get(m.parent_id).role == "user"]


def test_the_tree_and_its_head_are_read_in_one_read(store, controller, model, monkeypatch):
    session_id = controller.session_id
    real = SessionStore.messages
    writes = []

    def messages_then_another_process_writes(self, wanted):
        found = real(self, wanted)
        if not writes:  # after the tree is read, before anything else: a commit elsewhere
            writes.append(other_terminal_asked(model, "--session", str(session_id), "written in between"))
        return found

    monkeypatch.setattr(SessionStore, "messages", messages_then_another_process_writes)
    conversation = Conversation(store, session_id)
    assert writes
    head = conversation.head  # used to fail: "no message N", a head read after the tree
    assert head is not None and head.text.startswith("Reply 1 from the fake model")
    monkeypatch.undo()
    conversation.reload()
    assert conversation.head.parent_id is not None
    assert conversation.tree.get(conversation.head.parent_id).text == "written in between"


def test_a_send_on_a_head_moved_by_another_process_is_refused_and_the_chat_read_again(store, controller, model):
    session_id = controller.session_id
    shown = controller.snapshot().head
    other_terminal_asked(model, "--session", str(session_id), "from the other terminal")
    with pytest.raises(ChatChanged, match="changed in another window.*nothing was saved"):
        controller.send("mine")
    assert "mine" not in [m.text for m in store.messages(session_id)]
    now = controller.snapshot()
    assert now.head.id != shown.id and now.head.role == "assistant"  # read again: the other reply
    assert now.tree.get(now.head.parent_id).text == "from the other terminal"
    mine = controller.send("mine")
    assert mine.parent_id == now.head.id
    assert user_under_user(store, session_id) == []


def test_while_another_process_writes_a_reply_the_app_refuses_and_an_ask_queues(store, controller, model):
    session_id = controller.session_id
    first = other_terminal(model, "--session", str(session_id), "long one")
    second = None
    try:
        first.read_until(printed_some_reply, "the first reply to stream")  # it holds the turn now
        with pytest.raises(TurnTaken, match="another llamachat .* writing a reply"):
            controller.send("mine")
        with pytest.raises(TurnTaken):
            controller.regenerate(controller.snapshot().head.id)
        second = other_terminal(model, "--session", str(session_id), "queued question", max_tokens=SHORT_REPLY_TOKENS)
        second.read_until(lambda p: b"waiting" in p.err, "the second ask to wait", stream="err")
        assert first.drain() == 0, first.stderr
        assert second.drain() == 0, second.stderr
    finally:
        for process in (first, second):
            if process is not None:
                process.kill()
    messages = {m.text: m for m in store.messages(session_id)}
    first_question, queued = messages["long one"], messages["queued question"]
    first_reply = next(m for m in store.messages(session_id) if m.parent_id == first_question.id)
    assert len(first_reply.text.encode()) > 4096  # longer than the pipe: it was held mid-reply
    assert queued.parent_id == first_reply.id  # after the first reply, not beside or under its question
    assert user_under_user(store, session_id) == []
    with pytest.raises(ChatChanged):
        controller.send("mine")  # the chat shown is old: read again, then it goes on
    head = controller.snapshot().head
    assert head.parent_id == queued.id
    assert controller.send("mine").parent_id == head.id


def test_a_branch_that_grew_elsewhere_is_not_deleted(store, controller, model):
    session_id = controller.session_id
    question = controller.snapshot().path[0]
    counted = [m.id for m in controller.snapshot().path]
    other_terminal_asked(model, "--session", str(session_id), "added in another terminal")
    before = len(store.messages(session_id))
    with pytest.raises(ChatChanged, match="now holds 4 message"):
        controller.delete_subtree(question.id, expected_ids=counted)
    assert len(store.messages(session_id)) == before == 4
    assert [m.text for m in controller.snapshot().path][-2] == "added in another terminal"  # read again


def held_reply(controller: SessionController, script: FakeScript) -> tuple[threading.Thread, list]:
    """Start a reply that streams one piece and waits to be stopped; returns its thread."""
    script.hold_after = 1
    controller.send("answer me slowly")
    outcome: list = []

    def job():
        try:
            outcome.append(controller.generate_reply())
        except Exception as error:
            outcome.append(error)

    thread = threading.Thread(target=job)
    thread.start()
    assert controller.streamed.wait(30)
    return thread, outcome


def test_a_reply_is_stored_under_its_question_when_another_window_moved_the_head(store, controller, script):
    session_id = controller.session_id
    elsewhere = controller.snapshot().path[1].id  # the first reply
    thread, outcome = held_reply(controller, script)
    question = controller.snapshot().head
    with StoreProcess(store.path) as window:
        assert window("open")["ok"]
        assert window("set_head", session=session_id, message=elsewhere)["ok"]
    controller.cancel()
    thread.join(30)
    reply = outcome[0]
    assert reply.parent_id == question.id and reply.stats.stop_reason == StopReason.CANCELLED
    assert store.get_session(session_id).active_leaf_id == reply.id
    assert controller.snapshot().head.id == reply.id


def test_a_reply_whose_question_was_deleted_elsewhere_is_reported_lost(store, controller, script):
    session_id = controller.session_id
    thread, outcome = held_reply(controller, script)
    question = controller.snapshot().head
    with StoreProcess(store.path) as window:
        assert window("open")["ok"]
        assert window("delete_subtree", message=question.id)["ok"]
    controller.cancel()
    thread.join(30)
    error = outcome[0]
    assert isinstance(error, ReplyNotSaved)
    assert f"question (message {question.id}) was deleted in another window" in str(error)
    assert question.id not in [m.id for m in store.messages(session_id)]
    assert controller.snapshot().head.id != question.id  # the chat was read again
