"""Fixtures of the RPC tests: loopback server pairs and the tiny models split over them.

Every model is split three ways: layer 0 (and the token embeddings) stays on the local
CPU, the other layers and the output layer go to the two servers, half each
(``-ngl n_layer``, ``-ts 1,1``); so each memory kind keeps part of its cache or state on
this machine and part on each server.
"""

from __future__ import annotations

import pytest

from sessions.engine.settings import EngineSettings
from sessions.synth import make_model
from sessions.synth.archs import model_spec

from .servers import ServerPair

ARCHS = ("llama", "gemma3", "lfm2", "mamba")
ROUTE_ARCHS = (*ARCHS, "qwen35", "gemma4")
"""Every route over RPC: each memory kind, and a hybrid and a window architecture of late
2026 (Qwen3.5's cells carry extra position data; Gemma 4 shares KV between layers)."""
SWA_WINDOW = 32


def _require_rpc() -> None:
    from sessions.rpc.backend import rpc_compiled_in
    from sessions.rpc.errors import REBUILD

    if not rpc_compiled_in():
        pytest.fail(f"this llama-cpp-python has no RPC backend; rebuild it with: {REBUILD}")


@pytest.fixture(scope="session")
def shared_pair():
    """One pair for the tests that never kill a server."""
    _require_rpc()
    pair = ServerPair()
    yield pair
    pair.close()


@pytest.fixture
def pair():
    """A pair of its own, for a test that kills, pauses or restarts a server."""
    _require_rpc()
    pair = ServerPair()
    yield pair
    pair.close()


def tiny_model(arch: str):
    return make_model(arch, "tiny", swa_window=SWA_WINDOW)


def split_settings(arch: str, endpoints, **changes) -> EngineSettings:
    """Settings that put layer 0 on the CPU and the rest on the two servers, half each."""
    base = dict(n_ctx=2048, n_batch=64, threads=1, n_gpu_layers=model_spec(arch, "tiny").n_layer,
                tensor_split=(1.0, 1.0), rpc=tuple(endpoints))
    base.update(changes)
    return EngineSettings(**base)
