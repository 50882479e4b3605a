"""The controller warms the branch last seen under a message (real tiny model, real
llama.cpp): after a reopen its marks say disk, after ``warm_ahead`` they say RAM, and the
switch there restores from RAM."""

from __future__ import annotations

import pytest

from sessions.synth import make_model
from tests.real_controller import real_controller

pytestmark = pytest.mark.engine


def test_a_branch_warmed_through_the_controller_is_restored_from_ram(tmp_path, store):
    with real_controller(tmp_path, store, n_batch=64, max_tokens=12) as ctl:
        ctl.load_model(make_model("llama", "tiny"))
        ctl.new_session(system_prompt="Be brief. " * 10)
        first = ctl.send("hello there, how are you today?")
        reply = ctl.generate_reply()
        ctl.edit(first.id, "something else entirely, tell me about the sea")
        ctl.generate_reply()
        session = ctl.session_id

    with real_controller(tmp_path, store, n_batch=64, max_tokens=12) as ctl:  # everything on disk now
        ctl.load_model(make_model("llama", "tiny"))
        ctl.open_session(session)
        ctl.warm()  # the branch shown, live
        assert ctl.routes.checkpoint_tiers([reply.id]) == {reply.id: "disk"}
        with ctl._jobs.job():  # a job holds the engine: no plan to read
            assert ctl.routes.warm_ahead(first.id, lambda: False) is None
        assert ctl.routes.warm_ahead(first.id, lambda: True) is None  # stopped before it began

        planned_meanwhile: list[bool] = []

        def should_stop() -> bool:  # asked between the reads: the engine is free for a plan then
            planned_meanwhile.append(ctl.routes.plan_choice(first.id) is not None)
            return False

        warmed = ctl.routes.warm_ahead(first.id, should_stop)  # the branch last seen under the first message

        assert warmed is not None and warmed.segments > 0 and warmed.nbytes > 0
        held_to_plan, *reading = planned_meanwhile  # asked once before the plan too: held then
        assert not held_to_plan and reading and all(reading)
        assert ctl.routes.checkpoint_tiers([reply.id]) == {reply.id: "ram"}
        plan = ctl.routes.plan_choice(first.id)
        assert plan is not None and plan.ram_bytes > 0 and plan.disk_bytes == 0
        ctl.select(first.id)
        result = ctl.warm()
        assert result.tokens_evaluated == 0 and result.plan.ram_bytes > 0 and result.plan.disk_bytes == 0
