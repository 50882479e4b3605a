"""The engine in a child process (a model on RPC servers) samples several versions at once
as the engine in this process does: each version's text streams back under its index."""

from __future__ import annotations

from sessions.engine.chat_engine import LlamaChatEngine
from sessions.engine.process import EngineProcess
from sessions.engine.settings import EngineSettings
from sessions.llama.context import ContextParams
from sessions.sampling import SamplingSettings
from sessions.synth import make_model
from tests.threads import TEST_THREADS

SETTINGS = EngineSettings(n_ctx=256, n_batch=64, n_gpu_layers=0, threads=TEST_THREADS)
VERSIONS = [SamplingSettings(temperature=0.9, top_k=0, top_p=1.0, min_p=0.0, seed=seed) for seed in (3, 4, 5)]


def test_the_child_streams_each_version_and_samples_what_this_process_samples():
    path = make_model("llama", "tiny")
    child = EngineProcess(path, SETTINGS, checkpoint_dir=None)
    try:
        tokens = child.tokenize("Hello there, how are you today?", True)
        streamed: dict[int, str] = {}
        logits = child.prepare(tokens, [len(tokens)]).logits
        apart = child.generate_versions(logits, VERSIONS, max_tokens=10,
                                        on_text=lambda k, text: streamed.update({k: streamed.get(k, "") + text}))
        assert child.generate_versions(logits, VERSIONS, max_tokens=10, should_stop=lambda: True)[0].tokens == []
    finally:
        child.close()
    assert [streamed.get(k, "") for k in range(3)] == [version.text for version in apart]
    here = LlamaChatEngine(path, ContextParams(n_ctx=256, n_batch=64, n_threads=TEST_THREADS))
    try:
        logits = here.prepare(tokens, [len(tokens)]).logits
        assert [v.tokens for v in here.generate_versions(logits, VERSIONS, max_tokens=10)] == \
            [v.tokens for v in apart]
    finally:
        here.close()
