"""``SessionController.generate_versions`` on real models of the four memory kinds: the
prompt evaluated once for all versions, each stored with its seed, and each version, gone
on from after a reopen, restored from its checkpoints and exactly a recompute."""

from __future__ import annotations

import numpy as np
import pytest

from sessions.errors import ControllerError
from sessions.events import TextStreamed
from sessions.sampling import SamplingSettings
from sessions.synth import make_model
from sessions.tree import Message
from tests.controller.test_other_models_reply_stays_unstepped import from_scratch
from tests.real_controller import real_controller

pytestmark = pytest.mark.engine

ARCHS = ("llama", "gemma3", "lfm2", "mamba")
VERSIONS = SamplingSettings(temperature=0.9, top_k=0, top_p=1.0, min_p=0.0, seed=5, max_tokens=12)


def model_of(arch: str):
    return make_model(arch, "tiny", swa_window=32) if arch == "gemma3" else make_model(arch, "tiny")


@pytest.mark.parametrize("arch", ARCHS)
def test_versions_evaluate_the_prompt_once_and_go_on_exactly_after_a_reopen(tmp_path, store, arch):
    streamed: list[TextStreamed] = []
    with real_controller(tmp_path, store, n_batch=32, max_tokens=12) as controller:
        controller.listener = lambda event: streamed.append(event) if isinstance(event, TextStreamed) else None
        controller.load_model(model_of(arch))
        controller.new_session(system_prompt="Be brief.")
        question = controller.send("Tell me about the sea and the boats on it.")
        stored = controller.generate_versions(3, sampling=VERSIONS, shown=lambda: 1)
        versions = controller.snapshot().tree.children(question.id)
        shown = controller.snapshot().head
        assert stored == versions
        prompt = len(controller._chat.branch(controller.engine, question.id).tokens)
        session = controller.session_id
        # Going on from a version (at its end, from a place inside it) goes on the batch way.
        assert versions[0].stats.stop_reason == "length"
        longer = controller.continue_reply(versions[0].id, sampling=VERSIONS)
        cut = controller.continue_from(versions[2].id, len(versions[2].text) // 2, sampling=VERSIONS)
    assert longer.text.startswith(versions[0].text) and len(longer.text) > len(versions[0].text)
    assert longer.stats.batch == cut.stats.batch == 1
    assert len(shown.text) // 2 > 0 and cut.text != versions[2].text
    assert len(versions) == 3 and shown.id == versions[1].id
    assert [v.stats.seed for v in versions] == [5, 6, 7] and all(v.stats.batch == 3 for v in versions)
    assert [v.stats.tokens_evaluated for v in versions] == [prompt, 0, 0]  # once, for all three
    for k, version in enumerate(versions):  # each streamed under its own index
        assert "".join(e.text for e in streamed if e.version == k) == version.text
    with real_controller(tmp_path, store, n_batch=32, max_tokens=6) as controller:
        controller.load_model(model_of(arch))
        controller.open_session(session)
        for version in [*versions, longer, cut]:
            controller.select(version.id)
            asked = controller.send("Go on.")
            reply = controller.generate_reply()
            follow_up = len(controller._chat.branch(controller.engine, asked.id).tokens)
            after_version = len(controller._chat.branch(controller.engine, version.id).tokens)
            assert reply.stats.tokens_evaluated == follow_up - after_version  # the version restored, not decoded
            branch = controller._chat.branch(controller.engine, reply.id)
            assert branch.stepped[-3:] == [False, False, True]  # the version as a batch, the new reply stepped
            assert np.array_equal(controller.engine.branches.live_logits, from_scratch(controller.engine, branch))


def test_versions_one_after_another_where_no_batch_context_can_be_made(tmp_path, store, monkeypatch):
    """No room for the batch: the versions are written alone, from the question's state,
    and the listener is told why."""
    from sessions.engine.chat_engine import LlamaChatEngine
    from sessions.errors import BatchUnavailable
    from sessions.events import NoticeRaised

    def refuse(*_args, **_kwargs):
        raise BatchUnavailable("llama.cpp could not make a context for 3 versions at once (600 tokens): no memory")

    monkeypatch.setattr(LlamaChatEngine, "generate_versions", refuse)
    notices: list[str] = []
    with real_controller(tmp_path, store, n_batch=32, max_tokens=8) as controller:
        controller.listener = lambda event: notices.append(event.text) if isinstance(event, NoticeRaised) else None
        controller.load_model(model_of("llama"))
        controller.new_session()
        question = controller.send("Tell me about the sea.")
        controller.generate_versions(3, sampling=VERSIONS)
        versions: list[Message] = controller.snapshot().tree.children(question.id)
    assert [v.stats.seed for v in versions] == [5, 6, 7] and not any(v.stats.batch for v in versions)
    assert [v.stats.tokens_evaluated for v in versions][1:] == [0, 0]
    assert any("one after another" in text and "no memory" in text for text in notices)


def test_a_reply_keeps_the_seed_it_was_sampled_with_and_that_seed_writes_it_again(tmp_path, store):
    """With no fixed seed, each reply gets a new one, stored with it: regenerated with that
    seed, the reply is the same, token for token."""
    with real_controller(tmp_path, store, n_batch=32, max_tokens=12) as controller:
        controller.load_model(model_of("llama"))
        controller.new_session()
        controller.send("Tell me about the sea.")
        anyhow = VERSIONS.with_(seed=-1)
        first = controller.generate_reply(sampling=anyhow)
        controller.regenerate(first.id)
        other = controller.generate_reply(sampling=anyhow)
        controller.regenerate(first.id)
        again = controller.generate_reply(sampling=anyhow.with_(seed=first.stats.seed))
    assert first.stats.seed >= 0 and other.stats.seed >= 0 and first.stats.seed != other.stats.seed
    assert again.stats.seed == first.stats.seed and again.text == first.text


def test_versions_at_temperature_0_are_refused_in_a_sentence(tmp_path, store):
    with real_controller(tmp_path, store, n_batch=32, max_tokens=8) as controller:
        controller.load_model(model_of("llama"))
        controller.new_session()
        question = controller.send("Tell me about the sea.")
        for same in (VERSIONS.with_(temperature=0.0), VERSIONS.with_(top_k=1)):
            with pytest.raises(ControllerError, match="every version would be the same reply"):
                controller.generate_versions(3, sampling=same)
        assert controller.snapshot().tree.children(question.id) == []


def test_versions_that_would_need_more_than_the_chats_context_are_written_one_after_another(
        tmp_path, store, monkeypatch):
    """N versions of a long limit at once would need N times the limit in one context (a
    128k-context model: tens of GB): past the chat's own context they are written in turn
    in it, with a sentence, and no larger context is ever made."""
    from sessions.events import NoticeRaised
    from sessions.llama.batch_context import BatchContext

    made: list[int] = []
    real_init = BatchContext.__init__
    monkeypatch.setattr(BatchContext, "__init__", lambda self, model, params, n_seq, n_ctx: (
        made.append(n_ctx), real_init(self, model, params, n_seq, n_ctx))[1])
    notices: list[str] = []
    with real_controller(tmp_path, store, n_batch=32, max_tokens=8) as controller:  # a 512-token context
        controller.listener = lambda event: notices.append(event.text) if isinstance(event, NoticeRaised) else None
        controller.load_model(model_of("llama"))
        controller.new_session()
        question = controller.send("Tell me about the sea.")
        controller.generate_versions(3, sampling=VERSIONS.with_(max_tokens=400))
        versions = controller.snapshot().tree.children(question.id)
        assert made == []  # three times 400 tokens after the question: more than 512, never made
        assert len(versions) == 3 and not any(v.stats.batch for v in versions)
        assert any("one after another" in text and "more than the 512" in text for text in notices)
        controller.send("Again.")
        controller.generate_versions(2, sampling=VERSIONS)  # 2 x 12 tokens fit: one batch
        assert made and all(n <= 512 for n in made)
