"""The chat screen's decisions without a screen: targets, selection steps, questions."""

from __future__ import annotations

from sessions.api.chat import ChatSnapshot
from sessions.engine.reports import RoutePlan
from sessions.errors import ContextOverflow
from sessions.sampling import SamplingSettings
from sessions.store import Session
from sessions.tree import ConversationTree, Message
from tui.screens import chat_rules


def snapshot(*messages: Message) -> ChatSnapshot:
    tree = ConversationTree(messages)
    session = Session(id=1, title="t", created_at=0.0, updated_at=0.0, model_path=None, model_fingerprint=None,
                      system_prompt=None, sampling=SamplingSettings(), active_leaf_id=messages[-1].id)
    return ChatSnapshot(session, tree, tuple(tree.path_to(messages[-1].id)))


def message(id: int, parent: int | None, role: str, text: str = "") -> Message:
    return Message(id, 1, parent, role, text or f"{role} {id}", 0.0)


CHAT = snapshot(message(1, None, "system"), message(2, 1, "user"), message(3, 2, "assistant", "```py\nx = 1\n```"),
                message(4, 3, "user"), message(5, 4, "assistant"))


def test_the_target_is_the_selection_else_the_last_message_of_a_role():
    assert chat_rules.target(CHAT, None).id == 5
    assert chat_rules.target(CHAT, None, "user").id == 4
    assert chat_rules.target(CHAT, 2).id == 2
    assert chat_rules.target(CHAT, 2, "assistant") is None  # the selection is not of that role
    assert chat_rules.target(CHAT, 404).id == 5  # a selection that is gone counts as none
    assert chat_rules.target(None, None) is None


def test_selection_steps_stop_at_the_top_and_leave_at_the_bottom():
    ids = [1, 2, 3]
    assert chat_rules.step_selection(ids, None, -1) == 3
    assert chat_rules.step_selection(ids, None, 1) is None
    assert chat_rules.step_selection(ids, 1, -1) == 1
    assert chat_rules.step_selection(ids, 3, 1) is None
    assert chat_rules.step_selection([], None, -1) is None


def test_a_slow_switch_is_announced_and_a_quick_one_is_not():
    quick = RoutePlan(keep=0, evaluate_from=0, target_len=10, estimate_seconds=0.01)
    slow = RoutePlan(keep=0, evaluate_from=0, target_len=5000, estimate_seconds=120)
    assert chat_rules.switch_note(quick) is None
    assert chat_rules.switch_note(slow) == "switching will evaluate 5,000 tokens (~2 min)"


def test_questions_count_what_they_delete_and_say_when_trimming_cannot_help():
    assert chat_rules.delete_question(message(5, 4, "assistant", "Sure.\nMore"), 1) == (
        "Delete the reply “Sure.”? 1 message will be deleted.")
    long = "Roses are red and violets are blue and this line goes on for a while"
    assert chat_rules.delete_question(message(2, 1, "user", long), 4) == (
        "Delete your message “Roses are red and violets are blue and…” and the 3 messages below it "
        "on every branch? 4 messages will be deleted.")
    overflow = ContextOverflow.of_branch(900, 512)
    words, helps = chat_rules.trim_offer(CHAT, overflow)
    assert helps and words.startswith("This branch is 900 tokens long") and "new branch" in words
    alone = snapshot(message(1, None, "system"), message(2, 1, "user"))
    words, helps = chat_rules.trim_offer(alone, overflow)
    assert not helps and "this message alone does not fit" in words


def test_the_code_block_comes_from_the_selection_else_the_newest_message_with_one():
    assert chat_rules.last_code_block(CHAT, None) == "x = 1\n"
    assert chat_rules.last_code_block(CHAT, 5) is None
    assert chat_rules.InputMode("edit", 3).title.startswith("Editing")
    assert chat_rules.InputMode().title is None
