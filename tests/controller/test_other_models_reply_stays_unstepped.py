"""A reply written by another model is never replayed as if this model had sampled it.

A branch is rebuilt bit for bit only if every message is decoded the way it first was:
a reply this model sampled one token at a time is replayed one token at a time
(``stepped``), any other message in batches. A reply written before a model switch (F5)
has no tokens for the new model: the first time its branch is used they are rendered by
the template, stored, and decoded in batches. Every later use must say the same, or the
checkpoints and the live state (built in batches) stop matching a from-scratch rebuild
(replayed token by token), and the reply counts as continuable by a model that never
wrote it.
"""

from __future__ import annotations

import numpy as np
import pytest

from sessions.branching.branch_engine import BranchEngine
from sessions.errors import ControllerError
from sessions.llama.context import LlamaContext
from sessions.synth import make_model
from tests.real_controller import real_controller

pytestmark = pytest.mark.engine


@pytest.fixture
def controller(tmp_path, store):
    with real_controller(tmp_path, store, n_batch=32, max_tokens=10) as ctl:
        yield ctl


def from_scratch(engine, branch) -> np.ndarray:
    """The logits after the branch in a fresh context with no checkpoints."""
    fresh = BranchEngine(engine.model, LlamaContext(engine.model, engine.ctx.params), None,
                         interval=engine.branches.interval)
    try:
        return fresh.prepare(branch.tokens, branch.ends, stepped=branch.stepped).logits
    finally:
        fresh.ctx.close()


def test_a_reply_of_the_model_before_a_switch_is_rebuilt_as_it_was_decoded(controller):
    controller.load_model(make_model("llama", "tiny"))
    controller.new_session(system_prompt="Be brief.")
    controller.send("Tell me about the sea.")
    first = controller.generate_reply()  # llama's reply
    controller.load_model(make_model("gemma3", "tiny", swa_window=32))
    controller.send("Go on.")
    controller.generate_reply()  # gemma3 decodes llama's reply as a prompt, in batches

    branch = controller._chat.branch(controller.engine, None)
    assert branch.stepped == [False, False, False, False, True]  # only gemma3's own reply
    live = controller.warm(None)  # what the live context holds: nothing to decode
    assert live.tokens_evaluated == 0
    assert np.array_equal(controller.engine.branches.live_logits, from_scratch(controller.engine, branch))
    with pytest.raises(ControllerError, match="another model"):
        controller.continue_reply(first.id)
