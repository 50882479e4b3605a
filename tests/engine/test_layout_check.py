"""The layout of a model's saved states is read from the model and checked when it loads.

Every architecture made here parses as its layout says (Qwen3.5's cells carry extra
position data: they are read as such). A layout the parser cannot read (forced here by
giving the model the wrong one) is found by the check at load, before any reply: the
model then runs without checkpoints, says so in one sentence (a notice, the status
bar's memory kind, ``ask --stats``), and every reply is stored.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from sessions.api.chat import EngineSettings, SessionController
from sessions.engine.chat_engine import LlamaChatEngine
from sessions.engine.factory import llama_engine_factory
from sessions.events import ModelLoaded, NoticeRaised
from sessions.llama.context import ContextParams, LlamaContext
from sessions.llama.layout_check import layout_problem
from sessions.llama.model import LlamaModel
from sessions.llama.state_blob import CELL_EXT_BYTES, StateLayout
from sessions.sampling import SamplingSettings
from sessions.synth import ARCHS, make_model
from tests.cli_support import models_home, run
from tests.threads import TEST_THREADS

pytestmark = pytest.mark.engine

PARAMS = ContextParams(n_ctx=512, n_batch=32, n_threads=TEST_THREADS)


@pytest.mark.parametrize("arch", ARCHS)
def test_every_made_architecture_parses_as_its_layout_says(arch):
    model = LlamaModel(make_model(arch, "tiny"))
    try:
        expected = CELL_EXT_BYTES if arch == "qwen35" else 0  # IMROPE positions
        assert model.state_layout == StateLayout(cell_ext=expected)
        ctx = LlamaContext(model, PARAMS)
        try:
            assert layout_problem(ctx, model.info.kind) is None
            assert ctx.pos_max() == -1  # the check leaves the context as it was made
        finally:
            ctx.close()
    finally:
        model.close()


def _wrong_layout(monkeypatch) -> None:
    """Every model is told its cells carry no extra data when they do, and the reverse."""
    right = LlamaModel._state_layout

    def wrong(self) -> StateLayout:
        layout = right(self)
        return StateLayout(cell_ext=0 if layout.cell_ext else CELL_EXT_BYTES, values=layout.values)

    monkeypatch.setattr(LlamaModel, "_state_layout", wrong)


@pytest.mark.parametrize("arch", ["llama", "gemma3", "lfm2", "qwen35"])
def test_a_layout_the_parser_cannot_read_turns_checkpoints_off_in_one_sentence(tmp_path, monkeypatch, arch):
    from sessions.checkpoints import CheckpointStore

    _wrong_layout(monkeypatch)
    with CheckpointStore(tmp_path / "ck", ram_bytes=1 << 26, disk_bytes=1 << 30) as store:
        engine = LlamaChatEngine(make_model(arch, "tiny"), PARAMS, checkpoints=store)
        try:
            notice = engine.checkpoint_notice
            assert notice is not None and "runs without checkpoints" in notice and "\n" not in notice
            assert engine.branches.store is None
        finally:
            engine.close()


def test_a_chat_with_such_a_model_stores_every_reply(tmp_path, store, monkeypatch):
    from sessions.checkpoints import CheckpointStore

    _wrong_layout(monkeypatch)
    events: list = []
    with CheckpointStore(tmp_path / "ck", ram_bytes=1 << 26, disk_bytes=1 << 30) as checkpoints:
        ctl = SessionController(store, engine_factory=llama_engine_factory(checkpoints), checkpoints=checkpoints,
                                settings=EngineSettings(n_ctx=512, n_batch=32, threads=1, n_gpu_layers=0),
                                sampling=SamplingSettings(temperature=0.0, max_tokens=8), listener=events.append)
        try:
            ctl.load_model(make_model("qwen35", "tiny"))
            ctl.new_session()
            ctl.send("Tell me about the sea.")
            first = ctl.generate_reply()
            ctl.regenerate(first.id)
            second = ctl.generate_reply()
            assert second.text == first.text  # evaluated again: the same greedy reply
            assert second.stats.tokens_restored == 0
            assert len(store.messages(ctl.session_id)) == 3  # the question and both replies
        finally:
            ctl.close()
    loaded = [e for e in events if isinstance(e, ModelLoaded)]
    assert loaded and loaded[-1].kind == "hybrid, no checkpoints"
    told = [e.text for e in events if isinstance(e, NoticeRaised) and "runs without checkpoints" in e.text]
    assert len(told) == 1


def test_ask_says_it_ran_without_checkpoints(capsys, monkeypatch):
    _wrong_layout(monkeypatch)
    model = make_model("qwen35", "tiny")
    code, out, err = run(capsys, "ask", "-m", str(model), "-t", "1", "-c", "512", "--temp", "0", "--max-tokens",
                         "6", "--stats", "hello there")
    assert code == 0, err
    assert out.strip()
    assert "runs without checkpoints" in err
    stats = json.loads([line for line in err.splitlines() if line.startswith("{")][-1])
    assert stats["checkpoints"] is False and stats["tokens_generated"] > 0
    code, out, err = run(capsys, "sessions", "--json")
    assert code == 0 and json.loads(out)[0]["message_count"] == 2  # the question and its reply


def test_models_shows_the_last_load_ran_without_checkpoints(capsys, monkeypatch, tmp_path):
    """``llamachat models`` reads headers only; it learns what the load check found from
    the record each load leaves, for that very file."""
    model = models_home(tmp_path, monkeypatch) / "qwen35.gguf"
    shutil.copy(make_model("qwen35", "tiny"), model)
    ask = ("ask", "-m", str(model), "-t", "1", "-c", "512", "--temp", "0", "--max-tokens", "2", "hello")

    def listed() -> tuple[str, str, dict]:
        code, out, err = run(capsys, "models")
        assert code == 0, err
        row = next(line for line in out.splitlines() if line.endswith(str(model)))
        code, out, _ = run(capsys, "models", "--json")
        return row, err, next(card for card in json.loads(out) if card["path"] == str(model))

    row, err, card = listed()
    assert "no checkpoints" not in row and card["checkpoint_problem"] is None  # never loaded

    with monkeypatch.context() as patch:
        _wrong_layout(patch)
        assert run(capsys, *ask)[0] == 0
    row, err, card = listed()
    assert "hybrid: DeltaNet + attention, no checkpoints" in row
    assert (f"llamachat: {card['name']} ran without checkpoints when it was last loaded: "
            "its saved states are laid out") in err
    assert card["checkpoint_problem"].startswith("its saved states are laid out in a way llamachat does not read")

    assert run(capsys, *ask)[0] == 0  # loaded again, as it should be read
    row, err, card = listed()
    assert "no checkpoints" not in row and "ran without checkpoints" not in err and card["checkpoint_problem"] is None

    with monkeypatch.context() as patch:
        _wrong_layout(patch)
        assert run(capsys, *ask)[0] == 0
    model.write_bytes(model.read_bytes())  # the same name, another file (its time changed): not checked yet
    os.utime(model, ns=(1, 1))
    assert listed()[2]["checkpoint_problem"] is None
