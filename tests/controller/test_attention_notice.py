"""Attention that llama.cpp runs away from its layers is said, once, when the model loads.

The verdict comes from llama.cpp's own check (``attention_check``), read from its log;
here the lines are the ones its ``resolve_fused_ops`` writes, and the controller's part
runs with an engine whose placement carries the verdict. That llama.cpp really gives a
verdict, through a real context, is in ``tests/engine/test_attention_check.py``.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from sessions.api.chat import SessionController
from sessions.events import ModelLoaded, NoticeRaised
from sessions.llama.attention_check import AttentionVerdict, VerdictLog
from sessions.llama.placement import Placement
from tests.tui.fake_engine import FakeEngineFactory

MISMATCH = ("resolve_fused_ops: layer 0 is assigned to device CUDA0 but Flash Attention is assigned to device CPU "
            "(usually due to missing support)")
DISABLED = "resolve_fused_ops: Flash Attention not supported, set to disabled"
ENABLED = "resolve_fused_ops: Flash Attention enabled"


def heard(*lines: str) -> AttentionVerdict | None:
    log = VerdictLog()
    for line in lines:
        log(2, line)
    return log.verdict()


def test_the_verdict_is_read_from_llama_cpp_s_lines():
    assert heard("llama_context: n_ctx = 256", MISMATCH, DISABLED) == AttentionVerdict(False, "CUDA0", "CPU")
    assert heard("llama_context: n_ctx = 256", ENABLED) == AttentionVerdict(True)
    assert heard("llama_context: flash_attn = enabled") is None  # it did not check


def test_only_a_gpu_of_this_machine_is_probed():
    assert Placement(("CPU", "CUDA0[NVIDIA H100]")).on_local_gpu
    assert not Placement(("CPU", "CPU")).on_local_gpu
    assert not Placement(("CPU", "RPC[10.0.0.2:50052]")).on_local_gpu  # llama.cpp asks no RPC server


def test_the_placement_says_where_attention_runs():
    placed = Placement(("CPU", "CUDA0[NVIDIA H100]", "CUDA0[NVIDIA H100]"))
    assert placed.attention_notice() is None and placed.summary() == "CPU + CUDA0"
    elsewhere = replace(placed, attention_elsewhere=("CUDA0", "CPU"))
    assert elsewhere.summary() == "CPU + CUDA0 (attention on CPU)"
    notice = elsewhere.attention_notice()
    assert notice is not None
    assert notice.startswith("llama.cpp has no flash-attention kernel on CUDA0 for this model")
    assert "runs on the CPU" in notice
    assert elsewhere.key() == placed.key()  # the same layers, the same checkpoints


class PlacedOnGpu(FakeEngineFactory):
    def __init__(self, placement: Placement) -> None:
        super().__init__()
        self.placement = placement

    def __call__(self, path, settings, on_progress):
        engine = super().__call__(path, settings, on_progress)
        engine.devices = self.placement.summary()  # as LlamaChatEngine says it from its placement
        engine.attention_notice = self.placement.attention_notice()
        return engine


def load(store, placement: Placement, tmp_path: Path) -> list:
    events: list = []
    controller = SessionController(store, engine_factory=PlacedOnGpu(placement), listener=events.append)
    controller.load_model(tmp_path / "model.gguf")
    return events


def test_loading_tells_the_user_once(store, tmp_path):
    placement = Placement(("CPU", "CUDA0[NVIDIA H100]"), attention_elsewhere=("CUDA0", "CPU"))
    events = load(store, placement, tmp_path)
    loaded = [e for e in events if isinstance(e, ModelLoaded)]
    assert [e.devices for e in loaded] == ["CPU + CUDA0 (attention on CPU)"]
    notices = [e for e in events if isinstance(e, NoticeRaised) and "flash-attention" in e.text]
    assert notices == [NoticeRaised(placement.attention_notice() or "")]


def test_loading_is_quiet_when_attention_runs_with_its_layers(store, tmp_path):
    events = load(store, Placement(("CPU", "CUDA0[NVIDIA H100]")), tmp_path)
    assert [e.devices for e in events if isinstance(e, ModelLoaded)] == ["CPU + CUDA0"]
    assert not [e for e in events if isinstance(e, NoticeRaised) and "flash-attention" in e.text]
