"""Snapshots of a branch that no longer fits the context: the offer to go on in a new
branch without the oldest turns, that branch answered, and a message that alone does not
fit (nothing to leave out: it is said, not offered).

The fake engine's context is made small (its tokens are bytes); the chats end with a
question not yet answered, written straight into the store (fixed texts and times), and
Ctrl+R asks for its answer.
"""

from __future__ import annotations

import pytest

from sessions.store import SessionStore
from sessions.tree import GenerationStats
from tests.tui.helpers import settle, wait_for
from tests.tui.test_delete_snapshots import toast_shown
from tests.tui.test_main_snapshots import SIZE, quiet
from tui.screens.dialogs import ConfirmScreen
from tui.startup import StartupRequest

N_CTX = 400
TURNS = (("Tell me about llamas.",
          "Llamas are South American camelids, kept for their wool and as pack animals for centuries."),
         ("And alpacas?", "Alpacas are smaller than llamas and are bred mostly for their fine, soft fleece."),
         ("Which is friendlier?", "Both are gentle; llamas are more independent, alpacas more wary of people."))


@pytest.fixture(autouse=True)
def small_context(script):
    script.n_ctx = N_CTX


def write_chat(model_path, question: str, turns=TURNS) -> int:
    """``turns`` of questions and answers, then ``question`` unanswered at the head."""
    with SessionStore.open() as store:
        session = store.create_session(model_path=str(model_path), model_fingerprint="fake-" + model_path.name,
                                       created_at=0.0)
        parent, at = None, 1.0
        for ask, answer in turns:
            asked = store.add_message(session.id, parent, "user", ask, created_at=at)
            parent = store.add_message(session.id, asked.id, "assistant", answer, created_at=at + 1,
                                       stats=GenerationStats(tokens_generated=len(answer), stop_reason="eog")).id
            at += 2
        head = store.add_message(session.id, parent, "user", question, created_at=at)
        store.set_active_leaf(session.id, head.id)
        return session.id


async def offered(pilot) -> None:
    await quiet(pilot)
    await pilot.press("ctrl+r")  # answer the question at the head
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen), "the offer")


def test_the_offer_to_go_on_without_the_oldest_turns(snap_compare, make_app, fake_model):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, "Which one for a small farm?")))
    assert snap_compare(app, terminal_size=SIZE, run_before=offered)


def test_the_new_branch_answered(snap_compare, make_app, fake_model, script, store_clock):
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, "Which one for a small farm?")))

    async def trimmed(pilot):
        await offered(pilot)
        script.replies = ["Alpacas: they are smaller and easier to keep."]
        await pilot.press("enter")  # "Continue in a new branch"
        screen = pilot.app.screen
        await wait_for(pilot, lambda: screen.controller.snapshot().head.role == "assistant", "the answer")
        await settle(pilot)
        screen.status.set_speed(None)  # a speed measured on the fake's clock
        pilot.app.clear_notifications()

    assert snap_compare(app, terminal_size=SIZE, run_before=trimmed)


def test_a_message_that_alone_does_not_fit(snap_compare, make_app, fake_model):
    question = "Proofread this: " + " ".join(["the quick brown fox jumps over the lazy dog."] * 9)
    app = make_app(startup=StartupRequest(session_id=write_chat(fake_model, question, turns=())))

    async def refused(pilot):
        await quiet(pilot)
        await pilot.press("ctrl+r")
        await toast_shown(pilot, "this message alone does not fit")

    assert snap_compare(app, terminal_size=SIZE, run_before=refused)
