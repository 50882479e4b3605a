"""A reply edited by hand, shown (so decoded as a batch, its checkpoints taken), then gone on
from: the longer version, continued after a reopen, is bit for bit a recompute, on all
four memory kinds. It goes on the batch way (``continuation``): replayed one token at a
time instead, its tokens would stand for a second state beside the one the edited
reply's checkpoints hold."""

from __future__ import annotations

import numpy as np
import pytest

from sessions.sampling import SamplingSettings
from tests.controller.test_other_models_reply_stays_unstepped import from_scratch
from tests.controller.test_versions_controller import ARCHS, model_of
from tests.real_controller import real_controller

pytestmark = pytest.mark.engine


@pytest.mark.parametrize("arch", ARCHS)
def test_a_shown_edited_reply_gone_on_from_continues_exactly_after_a_reopen(tmp_path, store, arch):
    with real_controller(tmp_path, store, n_batch=32, max_tokens=8) as controller:
        controller.load_model(model_of(arch))
        controller.new_session()
        controller.send("Tell me about the sea and the boats.")
        reply = controller.generate_reply()
        typed = controller.edit(reply.id, "The sea is wide and deep, and the boats sail on it")
        shown = controller.warm(typed.id)  # as the app does after the edit
        assert shown.tokens_evaluated > 0
        longer = controller.continue_reply(typed.id, sampling=SamplingSettings(temperature=0.0, max_tokens=8))
        session = controller.session_id
    assert longer.text.startswith(typed.text) and longer.stats.batch == 1
    with real_controller(tmp_path, store, n_batch=32, max_tokens=6) as controller:
        controller.load_model(model_of(arch))
        controller.open_session(session)
        controller.select(longer.id)
        asked = controller.send("Go on.")
        follow = controller.generate_reply()
        branch = controller._chat.branch(controller.engine, follow.id)
        assert branch.stepped[-3:] == [False, False, True]
        restored = len(controller._chat.branch(controller.engine, longer.id).tokens)
        assert follow.stats.tokens_evaluated == len(controller._chat.branch(controller.engine, asked.id).tokens) \
            - restored
        assert np.array_equal(controller.engine.branches.live_logits, from_scratch(controller.engine, branch))
