"""A user message never follows another one, whatever the gesture (``sessions.turns``).

Run with Gemma's template, which refuses two user messages in a row ("Conversation roles
must alternate"): every path that used to leave such a pair must now end in a branch the
template renders and the model answers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sessions.api.chat import SessionController
from sessions.errors import ControllerError
from sessions.sampling import SamplingSettings
from sessions.templates.chat_template import ChatMessage, ChatTemplate
from sessions.tree import ConversationTree, Message
from sessions.turns import JOINER, place_user_message
from tests.tui.fake_engine import FakeEngineFactory, FakeScript


@pytest.fixture
def gemma(shared_dir) -> ChatTemplate:
    source = (shared_dir / "templates" / "google-gemma-2-2b-it.jinja").read_text()
    return ChatTemplate.compile(source, name="gemma-2", origin="a test")


@pytest.fixture
def controller(store, gemma, tmp_path):
    script = FakeScript(template=gemma)
    return SessionController(store, engine_factory=FakeEngineFactory(script),
                             sampling=SamplingSettings(temperature=0.0))


def roles(controller: SessionController) -> list[str]:
    return [m.role for m in controller.snapshot().path]


def assert_answerable(controller: SessionController) -> None:
    """The branch alternates, the real template renders it, and the model answers it."""
    path = controller.snapshot().path
    assert all(not (a.role == b.role == "user") for a, b in zip(path, path[1:], strict=False))
    controller.engine.template.render([ChatMessage(m.role, m.text) for m in path], add_generation_prompt=True)
    assert controller.generate_reply().role == "assistant"


def tree_of(*messages: tuple[int, int | None, str, str]) -> ConversationTree:
    return ConversationTree(Message(i, 1, parent, role, text, 0.0) for i, parent, role, text in messages)


def test_the_rule_joins_keeps_and_asks_again():
    tree = tree_of((1, None, "user", "hi"), (2, 1, "assistant", "hello"), (3, 2, "user", "are you there?  "))
    plain = place_user_message(tree, 2, "x")
    assert (plain.parent_id, plain.text, plain.joined, plain.again) == (2, "x", None, None)
    joined = place_user_message(tree, 3, "  and now?")
    assert joined.parent_id == 2 and joined.text == "are you there?" + JOINER + "and now?"
    assert joined.joined is not None and joined.joined.id == 3
    again = place_user_message(tree, 3, "are you there?")
    assert again.again is not None and again.again.id == 3
    beside = place_user_message(tree, 2, "are you there?")  # where it would go beside the waiting one
    assert beside.again is not None and beside.again.id == 3
    assert place_user_message(tree, None, "first").parent_id is None


def test_two_sends_with_no_model_loaded_become_one_message(controller, tmp_path):
    controller.new_session()
    first = controller.send("hi")
    second = controller.send("is anyone there?")
    assert second.parent_id == first.parent_id and second.text == "hi\n\nis anyone there?"
    assert controller.snapshot().tree.siblings(first.id) == [first, second]  # nothing typed is lost
    controller.load_model(tmp_path / "model.gguf")
    assert_answerable(controller)


def test_the_same_text_again_answers_the_waiting_message(controller, tmp_path):
    controller.load_model(tmp_path / "model.gguf")
    controller.new_session()
    waiting = controller.send("hello")
    controller.cancel()  # stopped before the reply began: the message waits
    with pytest.raises(ControllerError):
        controller.generate_reply()
    assert controller.send("hello") == waiting
    assert len(controller.snapshot().tree) == 1
    assert_answerable(controller)


@pytest.mark.parametrize("gesture", ["delete the reply", "rewind to the question"])
def test_a_message_sent_at_a_question_is_joined_to_it(controller, tmp_path, gesture):
    controller.load_model(tmp_path / "model.gguf")
    controller.new_session()
    question = controller.send("first")
    reply = controller.generate_reply()
    if gesture == "delete the reply":
        controller.delete_subtree(reply.id)
    else:
        controller.rewind(question.id)
    joined = controller.send("second")
    assert joined.text == "first\n\nsecond" and roles(controller) == ["user"]
    assert_answerable(controller)


def test_a_fork_at_a_question_is_joined_too(controller, tmp_path):
    controller.load_model(tmp_path / "model.gguf")
    controller.new_session()
    question = controller.send("first")
    controller.generate_reply()
    forked = controller.send("other", parent_id=question.id)
    assert forked.parent_id is None and forked.text == "first\n\nother"
    assert_answerable(controller)


def test_a_new_chat_is_saved_with_its_first_message(store, tmp_path):
    controller = SessionController(store, engine_factory=FakeEngineFactory())
    controller.load_model(Path(tmp_path / "model.gguf"))
    controller.new_session(system_prompt="Be brief.", sampling=SamplingSettings(top_k=7))
    assert controller.session_id is None and store.list_sessions() == []
    assert controller.snapshot().settings.system_prompt == "Be brief."
    controller.new_session()  # an unused chat left behind: nothing to clean up
    assert store.list_sessions() == []
    controller.new_session(system_prompt="Be brief.", sampling=SamplingSettings(top_k=7))
    question = controller.send("hello")
    session = store.get_session(controller.session_id)
    assert (session.system_prompt, session.sampling.top_k, session.model_path) == (
        "Be brief.", 7, str(tmp_path / "model.gguf"))
    assert [(m.role, m.text) for m in controller.snapshot().path] == [("system", "Be brief."), ("user", "hello")]
    assert question.parent_id == controller.snapshot().path[0].id
    assert [s.id for s in store.list_sessions()] == [controller.session_id]


def test_without_joining_a_new_text_goes_beside_the_waiting_question():
    tree = tree_of((1, None, "user", "hi"), (2, 1, "assistant", "hello"), (3, 2, "user", "are you there?"))
    beside = place_user_message(tree, 3, "something else", join=False)
    assert (beside.parent_id, beside.text, beside.joined, beside.again) == (2, "something else", None, None)
    again = place_user_message(tree, 3, "are you there?", join=False)
    assert again.again is not None and again.again.id == 3


@pytest.mark.parametrize("prompt", [None, "Be brief."])
def test_a_frozen_send_stores_the_tokens_the_branch_would_compute(controller, tmp_path, store, prompt):
    from sessions.controller.branch_tokens import freeze_all

    controller.load_model(tmp_path / "model.gguf")
    controller.new_session(system_prompt=prompt)
    first = controller.send("hi", frozen=True)  # the draft is saved with it
    controller.generate_reply()
    second = controller.send("and a second question", frozen=True)
    fingerprint = controller.engine.info.fingerprint
    path = controller.snapshot().path
    computed = freeze_all(controller.engine, path)
    assert [m.id for m in path][-3::2] == [first.id, second.id]
    assert store.get_tokens(first.id, fingerprint) == computed[-3]
    assert store.get_tokens(second.id, fingerprint) == computed[-1]
