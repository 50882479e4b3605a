"""The engine in a child process says where each state is kept, as the engine in this
process does: the tree panel's marks for a chat whose model runs apart (RPC servers)."""

from __future__ import annotations

from sessions.checkpoints import prefix_hash
from sessions.engine.process import EngineProcess
from sessions.engine.settings import EngineSettings
from sessions.synth import make_model
from tests.threads import TEST_THREADS

SETTINGS = EngineSettings(n_ctx=256, n_batch=64, n_gpu_layers=0, threads=TEST_THREADS)


def test_the_child_answers_where_the_states_are_in_one_call(tmp_path):
    engine = EngineProcess(make_model("llama", "tiny"), SETTINGS, checkpoint_dir=tmp_path / "checkpoints")
    try:
        tokens = engine.tokenize("Hello there, how are you today?", True)
        first = len(tokens) // 2
        engine.prepare(tokens, [first, len(tokens)], need_logits=True)
        other = engine.tokenize("Something else entirely.", True)
        asked = [prefix_hash(tokens[:first]), prefix_hash(tokens), prefix_hash(other)]
        assert engine.saved_tiers(asked) == ["ram", "ram", None]
        assert engine.saved_tiers([]) == []
    finally:
        engine.close()


def test_the_child_warms_a_branch_into_its_ram(tmp_path):
    def start() -> EngineProcess:
        return EngineProcess(make_model("llama", "tiny"), SETTINGS, checkpoint_dir=tmp_path / "checkpoints")

    engine = start()
    try:
        tokens = engine.tokenize("Hello there, how are you today?", True)
        other = engine.tokenize("Something else entirely.", True)
        engine.prepare(tokens, [len(tokens)], need_logits=True)
        engine.prepare(other, [len(other)], need_logits=True)
    finally:
        engine.close()  # its writes land
    engine = start()
    try:
        engine.prepare(other, [len(other)], need_logits=True)
        assert engine.saved_tiers([prefix_hash(tokens)]) == ["disk"]
        assert engine.warm_ahead(tokens, [len(tokens)], lambda: True).stopped  # stopped before the call
        assert engine.saved_tiers([prefix_hash(tokens)]) == ["disk"]
        warmed = engine.warm_ahead(tokens, [len(tokens)], lambda: False)
        assert warmed.segments > 0 and warmed.nbytes > 0
        assert engine.saved_tiers([prefix_hash(tokens)]) == ["ram"]
    finally:
        engine.close()
