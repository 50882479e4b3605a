"""Where each message's state is kept, as the tree panel's marks read it: a real tiny model,
a real checkpoint store, and the controller's ``checkpoint_tiers``."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from sessions.api.chat import EngineSettings, SessionController
from sessions.checkpoints import CheckpointStore
from sessions.engine.factory import llama_engine_factory
from sessions.sampling import SamplingSettings
from sessions.synth import make_model

pytestmark = pytest.mark.engine


@contextmanager
def controller_with(tmp_path, store, ram_bytes: int):
    with CheckpointStore(tmp_path / "checkpoints", ram_bytes=ram_bytes, disk_bytes=1 << 30) as checkpoints:
        ctl = SessionController(store, engine_factory=llama_engine_factory(checkpoints), checkpoints=checkpoints,
                                settings=EngineSettings(n_ctx=512, n_batch=64, threads=1, n_gpu_layers=0),
                                sampling=SamplingSettings(temperature=0.0, max_tokens=6))
        try:
            ctl.load_model(make_model("llama", "tiny"))
            ctl.new_session(system_prompt="Be brief.")
            yield ctl, checkpoints
        finally:
            ctl.close()


def test_states_kept_in_ram_are_said_so_and_a_message_never_decoded_is_cold(tmp_path, store):
    with controller_with(tmp_path, store, ram_bytes=64 << 20) as (ctl, _):
        question = ctl.send("hello")
        reply = ctl.generate_reply()
        edited = ctl.edit(question.id, "hello again")  # a new version, never decoded yet
        tiers = ctl.routes.checkpoint_tiers()
        assert tiers[question.id] == "ram" and tiers[reply.id] == "ram"
        assert tiers[edited.id] is None
        assert set(tiers) == set(ctl.snapshot().tree.ids())
        assert ctl.routes.checkpoint_tiers([reply.id, edited.id, 10_000]) == {reply.id: "ram", edited.id: None}
        assert ctl.routes.saved_message_ids() == {m for m, tier in tiers.items() if tier}


def test_states_only_on_disk_are_said_to_be_on_disk(tmp_path, store):
    with controller_with(tmp_path, store, ram_bytes=0) as (ctl, checkpoints):  # nothing stays in RAM
        question = ctl.send("hello")
        reply = ctl.generate_reply()
        assert checkpoints.flush(30)
        assert ctl.routes.checkpoint_tiers([question.id, reply.id]) == {question.id: "disk", reply.id: "disk"}


def test_without_a_model_every_message_is_cold(tmp_path, store):
    ctl = SessionController(store, engine_factory=llama_engine_factory(None))
    ctl.new_session()
    first = ctl.send("hello")
    assert ctl.routes.checkpoint_tiers() == {first.id: None}
