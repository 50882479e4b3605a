"""A chat emptied by deleting its first message keeps answering under its system prompt.

F8 on the first message of a chat deletes every message below it. The chat itself stays,
with its settings: the settings screen (``chat_settings``) still shows its system
prompt, and that is the prompt the next message is written under, as in a new chat,
whose first message is stored under its system prompt. Real tiny model, so that the
reply is the model's answer to the branch the store holds.
"""

from __future__ import annotations

import pytest

from sessions.store import SessionStore
from sessions.synth import make_model
from tests.real_controller import real_controller

pytestmark = pytest.mark.engine


@pytest.fixture
def controller(tmp_path, store):
    with real_controller(tmp_path, store, n_batch=64, max_tokens=8) as ctl:
        ctl.load_model(make_model("llama", "tiny"))
        yield ctl


def test_the_next_message_after_deleting_every_message_goes_under_the_system_prompt(controller, store):
    controller.new_session(system_prompt="Be brief.")
    controller.send("hello")
    controller.generate_reply()
    controller.delete_subtree(controller.snapshot().path[0].id)  # the system message: the whole chat
    assert controller.chat_settings().system_prompt == "Be brief."  # what the settings screen shows

    controller.send("hello again")
    reply = controller.generate_reply()

    path = controller.snapshot().path
    assert [(m.role, m.text) for m in path[:2]] == [("system", "Be brief."), ("user", "hello again")]
    assert path[-1] == reply and controller.chat_settings().system_prompt == "Be brief."
    with SessionStore.open(store.path) as other:  # what reopening the chat shows
        session, tree = other.load_session_tree(controller.session_id)
    assert [m.role for m in tree.path_to(session.active_leaf_id)] == ["system", "user", "assistant"]


def test_a_chat_whose_system_prompt_was_removed_starts_its_branch_without_one(controller):
    controller.new_session(system_prompt="Be brief.")
    controller.send("hello")
    controller.generate_reply()
    controller.set_system_prompt(None)  # a new branch from the top, with no system prompt
    controller.send("hello again")
    assert [m.role for m in controller.snapshot().path] == ["user"]
