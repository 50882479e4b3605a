"""A real engine prices switches at the speeds its own llama_decode calls showed, and a
reopened chat at those its stored replies recorded (real tiny model, real llama.cpp)."""

from __future__ import annotations

import pytest

from sessions.synth import make_model
from tests.real_controller import real_controller

pytestmark = pytest.mark.engine


def test_a_switch_is_priced_at_rates_measured_by_the_calls_of_its_own_kind(tmp_path, store):
    with real_controller(tmp_path, store, n_batch=64, max_tokens=24) as ctl:
        ctl.load_model(make_model("llama", "tiny"))
        ctl.new_session(system_prompt="Be brief. " * 10)  # a batch of more than BATCH_MIN tokens
        first = ctl.send("hello there, how are you today?")
        ctl.generate_reply()  # one-token calls
        speeds = ctl.engine.branches.ctx.speeds
        assert speeds.batched is not None and speeds.step is not None

        edited = ctl.edit(first.id, "something else entirely")
        plan = ctl.routes.plan_for(edited.id)
        assert plan.rates.measured
        assert plan.rates.eval_per_token == pytest.approx(speeds.batched)
        assert plan.rates.step_seconds == pytest.approx(speeds.step)
        session = ctl.session_id

    with real_controller(tmp_path, store, n_batch=64, max_tokens=24) as ctl:  # a new engine: nothing decoded
        ctl.load_model(make_model("llama", "tiny"))
        ctl.open_session(session)
        assert ctl.engine.branches.ctx.speeds.step is None
        reply = next(m for m in ctl.snapshot().tree.messages() if m.role == "assistant")
        plan = ctl.routes.plan_for(reply.id)
        assert plan.rates.measured  # from the stored reply's speeds, not the defaults
        assert plan.rates.step_seconds == pytest.approx(1 / reply.stats.generation_tps)


def test_a_reply_keeps_the_engines_decode_rates_and_a_reopened_chat_is_priced_at_them(tmp_path, store):
    with real_controller(tmp_path, store, n_batch=64, max_tokens=24) as ctl:
        ctl.load_model(make_model("llama", "tiny"))
        ctl.new_session(system_prompt="Be brief. " * 10)
        ctl.send("hello there, how are you today?")
        ctl.generate_reply()
        ctl.send("and what else can you say about it, at some length?")
        second = ctl.generate_reply()  # planned after the first reply's calls: the rates are known
        assert second.stats.decode_batch_seconds > 0 and second.stats.decode_step_seconds > 0
        session = ctl.session_id

    with real_controller(tmp_path, store, n_batch=64, max_tokens=24) as ctl:
        ctl.load_model(make_model("llama", "tiny"))
        ctl.open_session(session)
        plan = ctl.routes.plan_for(second.id)
        assert plan.rates.step_seconds == pytest.approx(second.stats.decode_step_seconds)
        assert plan.rates.eval_per_token == pytest.approx(second.stats.decode_batch_seconds)
