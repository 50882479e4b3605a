"""The architectures of late 2026 chat through the controller, every route exact.

One chat per architecture goes through every gesture that moves the context (a reply,
an edit of the question, a switch back, a regenerate, a continue at the end of a reply
and from a place inside it, several versions at once, and the same chat reopened with
only its checkpoints on disk): after each, the logits the live context holds equal a
from-scratch recompute of the branch, bit for bit, and the routes that should restore
rather than evaluate do. The four older memory kinds go through the same routes in the
tests of each route (``test_versions_controller``, ``test_typed_reply_continued``, ...).
"""

from __future__ import annotations

import numpy as np
import pytest

from sessions.sampling import SamplingSettings
from sessions.synth import make_model
from tests.controller.test_other_models_reply_stays_unstepped import from_scratch
from tests.real_controller import real_controller

pytestmark = pytest.mark.engine

NEW_ARCHS = ("qwen35", "qwen3next", "gemma4", "gpt-oss", "granitehybrid", "mamba2")
VERSIONS = SamplingSettings(temperature=0.9, top_k=0, top_p=1.0, min_p=0.0, seed=3, max_tokens=8)


def exact(controller, leaf_id: int | None = None) -> None:
    """The live context holds the branch ending at ``leaf_id`` (the head) exactly."""
    branch = controller._chat.branch(controller.engine, leaf_id)
    live = controller.engine.branches
    assert live.live == branch.tokens
    assert np.array_equal(live.live_logits, from_scratch(controller.engine, branch))


@pytest.mark.parametrize("arch", NEW_ARCHS)
def test_every_gesture_is_exact_on_the_new_architectures(tmp_path, store, arch):
    with real_controller(tmp_path, store, n_batch=32, max_tokens=10) as controller:
        controller.load_model(make_model(arch, "tiny"))
        controller.new_session(system_prompt="Be brief.")
        question = controller.send("Tell me about the sea and the boats that sail on it at night.")
        first = controller.generate_reply()
        exact(controller)
        controller.send("And the stars above the water?")
        later = controller.generate_reply()
        exact(controller)

        edited = controller.edit(question.id, "Tell me about the mountains and the snow on them.")
        other = controller.generate_reply()  # the edit is a sibling: a new branch from the system prompt
        assert other.parent_id == edited.id
        exact(controller)

        controller.select(later.id)  # back to the first branch, and one more turn
        controller.send("Which star is brightest?")
        follow = controller.generate_reply()
        assert follow.stats.tokens_restored > 0
        exact(controller)

        controller.regenerate(first.id)  # its question again: restored, not evaluated
        again = controller.generate_reply()
        assert again.text == first.text and again.stats.tokens_evaluated == 0
        exact(controller)

        cut = next(m for m in (again, later, other, follow) if m.stats.stop_reason == "length")
        longer = controller.continue_reply(cut.id)  # cut at its length limit: go on
        assert longer.text.startswith(cut.text) and len(longer.text) > len(cut.text)
        exact(controller)
        inside = controller.continue_from(longer.id, len(longer.text) // 2)
        exact(controller)

        controller.regenerate(follow.id)
        versions = controller.generate_versions(2, sampling=VERSIONS, shown=lambda: 0)
        assert len(versions) == 2 and controller.snapshot().head.id == versions[0].id
        exact(controller)
        session = controller.session_id

    with real_controller(tmp_path, store, n_batch=32, max_tokens=6) as controller:  # only the disk is left
        controller.load_model(make_model(arch, "tiny"))
        controller.open_session(session)
        for leaf in (versions[1], inside, other):
            controller.select(leaf.id)
            asked = controller.send("Go on.")
            reply = controller.generate_reply()
            prompt = len(controller._chat.branch(controller.engine, asked.id).tokens)
            before = len(controller._chat.branch(controller.engine, leaf.id).tokens)
            assert reply.stats.tokens_evaluated == prompt - before  # the leaf came back from its checkpoints
            exact(controller)
