"""Continuing a reply cut at its length limit: only new tokens are evaluated, and the longer
reply is exactly what one longer generation would have written.

In one process (the controller over the real engine, the cut reply's logits still live)
and across processes (``ask --continue`` in a new process restores them from disk).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from sessions.api.chat import EngineSettings, SessionController
from sessions.controller.branch_tokens import branch_tokens
from sessions.engine.factory import llama_engine_factory
from sessions.errors import ControllerError
from sessions.sampling import SamplingSettings
from sessions.stop_reason import StopReason
from sessions.store import SessionStore
from sessions.synth import make_model

pytestmark = pytest.mark.engine

GREEDY = SamplingSettings(temperature=0.0, max_tokens=6)


@pytest.fixture
def controller():
    from sessions.checkpoints import CheckpointStore

    store = SessionStore.open()
    checkpoints = CheckpointStore(ram_bytes=64 << 20, disk_bytes=0)
    ctl = SessionController(store, engine_factory=llama_engine_factory(checkpoints),
                            settings=EngineSettings(n_ctx=512, n_batch=64, threads=1), sampling=GREEDY)
    ctl.load_model(make_model("llama", "tiny"))
    yield ctl
    ctl.close()
    checkpoints.close()
    store.close()


def frozen(controller: SessionController, message_id: int) -> list[int]:
    tokens = controller._store.get_tokens(message_id, controller.engine.info.fingerprint)
    assert tokens is not None
    return tokens


def test_a_continued_reply_is_one_longer_generation_and_evaluates_nothing(controller):
    controller.new_session(system_prompt="Be brief.")
    question = controller.send("Tell me a long story about the sea.")
    cut = controller.generate_reply()
    assert cut.stats.stop_reason == StopReason.LENGTH and cut.stats.tokens_generated == 6

    tokens, ends, stepped = branch_tokens(controller._store, controller.engine, controller.snapshot().path)
    plan = controller.engine.branches.plan(tokens, ends, stepped=stepped)
    assert (plan.tokens_to_evaluate, plan.logits_source) == (0, "live")  # the logits after the cut were kept
    longer = controller.continue_reply(max_tokens=5)
    assert (longer.stats.tokens_evaluated, longer.stats.tokens_restored) == (0, 0)  # all of it still live
    assert longer.parent_id == question.id and longer.id != cut.id  # a new version; the cut one stays
    assert controller.snapshot().head == longer
    assert longer.text.startswith(cut.text) and longer.stats.tokens_generated == 11
    assert frozen(controller, longer.id)[:6] == frozen(controller, cut.id)

    controller.regenerate(cut.id)  # the same question, answered in one go with room for 11 tokens
    whole = controller.generate_reply(sampling=GREEDY.with_(max_tokens=11))
    assert frozen(controller, whole.id) == frozen(controller, longer.id)
    assert whole.text == longer.text


def test_what_cannot_be_continued_is_refused_in_plain_words(controller):
    controller.new_session()
    question = controller.send("Hello")
    with pytest.raises(ControllerError, match="only a reply"):
        controller.continue_reply(question.id)
    ended = controller.generate_reply(sampling=GREEDY.with_(max_tokens=1))
    assert ended.stats.stop_reason == StopReason.LENGTH
    pasted = controller._chat.conv().append("assistant", "typed in by hand", parent_id=question.id)
    with pytest.raises(ControllerError, match="written or edited by hand goes on from its end"):
        controller.continue_from(pasted.id, 5)  # its tokens are a rendering, not what the model wrote


def test_a_reply_edited_by_hand_goes_on_from_its_text_exactly(controller):
    from sessions.branching.branch_engine import BranchEngine
    from sessions.llama.context import LlamaContext

    controller.new_session(system_prompt="Be brief.")
    controller.send("Tell me about the sea.")
    reply = controller.generate_reply(max_tokens=6)
    edited = controller.edit(reply.id, "The sea is wide and")
    assert edited.stats is None
    again = controller.continue_reply(edited.id, max_tokens=5)
    assert again.parent_id == reply.parent_id and again.id not in (reply.id, edited.id)  # a third version
    assert again.text.startswith("The sea is wide and") and len(again.text) > len(edited.text)
    piece, tokens = frozen(controller, edited.id), frozen(controller, again.id)
    assert tokens[:len(piece)] == piece and 1 <= len(tokens) - len(piece) <= 5  # its text, then the model's
    assert again.stats.batch == 1  # gone on the batch way: decoded as a batch, as the typed text is
    # The state the continuation left is a fresh context's that decodes the branch as every
    # rebuild will: the typed text and what followed it, as one batch.
    branches = controller.engine.branches
    target, ends, stepped = branch_tokens(controller._store, controller.engine, controller.snapshot().path)
    assert not stepped[-1] and branches.live == target
    fresh = BranchEngine(branches.model, LlamaContext(branches.model, branches.ctx.params), None)
    try:
        recomputed = fresh.prepare(target, ends, stepped=stepped).logits
    finally:
        fresh.ctx.close()
    assert np.array_equal(branches.live_logits, recomputed)
    # And going on again, after a restore of its end, evaluates nothing new but the reply.
    longer = controller.continue_reply(again.id, max_tokens=3)
    assert longer.stats.tokens_evaluated == 0 and longer.text.startswith(again.text)


def ask(*argv: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "sessions.cli", "ask", "--temp", "0", "--stats", *argv],
                          capture_output=True, text=True, env=os.environ.copy(), timeout=120)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stderr.strip().splitlines()[-1])
    stats["stdout"] = done.stdout
    return stats


def test_ask_continue_in_a_new_process_restores_the_reply_and_evaluates_nothing():
    model = str(make_model("llama", "tiny"))
    first = ask("-m", model, "--max-tokens", "6", "Tell me a long story about the sea.")
    assert first["stop_reason"] == "length"
    more = ask("-m", model, "--session", str(first["session"]), "--max-tokens", "5",
               "--continue", str(first["message"]))
    assert more["tokens_evaluated"] == 0
    assert more["tokens_restored"] == first["tokens_evaluated"] + first["tokens_generated"]
    assert more["parent"] == first["parent"] and more["tokens_generated"] == 11
    with SessionStore.open() as store:
        cut, longer = store.get_message(first["message"]), store.get_message(more["message"])
        assert longer.text == cut.text + more["stdout"].rstrip("\n")
    # The continued version is checkpointed whole too: continued again in a third process,
    # or followed by a question, none of its 11 tokens is replayed.
    again = ask("-m", model, "--session", str(first["session"]), "--max-tokens", "4",
                "--continue", str(more["message"]))
    assert (again["tokens_evaluated"], again["tokens_generated"]) == (0, 15)
    assert again["tokens_restored"] == first["tokens_evaluated"] + 11
    question = ask("-m", model, "--session", str(first["session"]), "--max-tokens", "2", "And then?")
    with SessionStore.open() as store:
        assert store.get_message(question["parent"]).parent_id == again["message"]
    assert question["tokens_restored"] == first["tokens_evaluated"] + 15
    assert question["tokens_evaluated"] < first["tokens_evaluated"]  # the question's tokens only


def test_continue_from_a_place_in_a_reply_keeps_its_start_and_evaluates_one_token(controller):
    controller.new_session(system_prompt="Be brief.")
    controller.send("Tell me a long story about the sea.")
    reply = controller.generate_reply(max_tokens=20)
    half = len(reply.text) // 2
    again = controller.continue_from(reply.id, half, max_tokens=5)
    assert again.parent_id == reply.parent_id and again.id != reply.id  # a new version; the reply stays
    assert controller.snapshot().tree.get(reply.id).text == reply.text
    old, new = frozen(controller, reply.id), frozen(controller, again.id)
    detokenize = controller.engine.detokenize
    kept = max(k for k in range(len(old)) if len(detokenize(old[:k])) <= half)  # the cut: between tokens
    assert new[:kept] == old[:kept] and 1 <= len(new) - kept <= 5  # the reply's own start, then what was written
    assert again.text.startswith(detokenize(old[:kept]))
    assert again.stats.tokens_evaluated == 1  # the cells are cut at the token; the last kept one gives the logits
    with pytest.raises(ControllerError, match="end of the reply"):
        controller.continue_from(reply.id, len(reply.text))


def test_ask_continue_from_in_a_new_process():
    model = str(make_model("llama", "tiny"))
    first = ask("-m", model, "--max-tokens", "12", "Tell me a long story about the sea.")
    with SessionStore.open() as store:
        text = store.get_message(first["message"]).text
    more = ask("-m", model, "--session", str(first["session"]), "--max-tokens", "4",
               "--continue", str(first["message"]), "--from", str(len(text) // 2))
    with SessionStore.open() as store:
        longer = store.get_message(more["message"])
    assert longer.parent_id == first["parent"] and longer.text.startswith(text[: len(text) // 4])
    # Nothing is live in the new process: the whole reply is restored from its checkpoints,
    # then cut, and only the last kept token is decoded (for the logits after the cut).
    assert more["tokens_evaluated"] == 1
    assert more["tokens_restored"] == first["tokens_evaluated"] + first["tokens_generated"]
