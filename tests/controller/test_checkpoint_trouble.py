"""A checkpoint that cannot be taken, read out or put back never costs a reply.

A state llama.cpp writes in a layout the engine does not read (as Qwen3.5's cells once
were) raises ``LayoutError`` wherever a state is parsed. Injected at each point where the
engine deals with a state (while the prompt and reply are decoded, when the checkpoints
are read out after the reply, when they are put back after a reopen), on each memory
kind, the reply is stored, the trouble is told once, and the next gesture works: a
regenerate at temperature 0 writes the same reply, so what the checkpoint would have
given was evaluated again exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sessions.api.chat import EngineSettings, SessionController
from sessions.branching.captures import Captures
from sessions.branching.restore_reads import RestoreReads
from sessions.branching.swa_ring import SwaRing
from sessions.checkpoints import CheckpointStore
from sessions.engine.factory import llama_engine_factory
from sessions.llama.context import LlamaContext
from sessions.llama.state_blob import LayoutError
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from tests.controller.test_versions_controller import ARCHS, model_of

pytestmark = pytest.mark.engine

BROKEN = "an injected layout the parser cannot read"
LONG = " ".join(["Tell me about the sea and the boats that sail on it at night."] * 18)


def _broken(*_args, **_kwargs):
    raise LayoutError(BROKEN)


_state_read = LlamaContext.state_read


def _broken_when_warm(ctx, seq, flags=0, *, warm=False, size=None):
    """A state read on the decode's path (the ones made ``warm``: windows and recurrent
    states captured as the prompt and the reply pass them) fails; the others work."""
    if warm:
        raise LayoutError(BROKEN)
    return _state_read(ctx, seq, flags, warm=warm, size=size)


POINTS = {
    # while the prompt and the reply are decoded: the window and recurrent states read on the way
    "capture": [(LlamaContext, "state_read", _broken_when_warm), (SwaRing, "piece", _broken)],
    # after the reply: the cells of each range, and the snapshots
    "read-out": [(LlamaContext, "read_range", _broken), (Captures, "_save_snapshot", _broken)],
    # after a reopen: every checkpoint read back
    "restore": [(RestoreReads, "cells", _broken), (RestoreReads, "snapshot", _broken)],
}


@contextmanager
def controller_in(folder: Path, store: SessionStore, notices: list[str]) -> Iterator[SessionController]:
    with CheckpointStore(folder / "checkpoints", ram_bytes=64 << 20, disk_bytes=1 << 30,
                         on_problem=notices.append) as checkpoints:
        ctl = SessionController(store, engine_factory=llama_engine_factory(checkpoints), checkpoints=checkpoints,
                                settings=EngineSettings(n_ctx=512, n_batch=32, threads=1, n_gpu_layers=0),
                                sampling=SamplingSettings(temperature=0.0, max_tokens=8))
        try:
            yield ctl
        finally:
            ctl.close()


@pytest.mark.parametrize("point", list(POINTS))
@pytest.mark.parametrize("arch", ARCHS)
def test_a_checkpoint_that_fails_keeps_the_reply_and_the_next_gesture_works(tmp_path, store, monkeypatch,
                                                                           arch, point):
    notices: list[str] = []
    with controller_in(tmp_path, store, notices) as controller:
        controller.load_model(model_of(arch))
        controller.new_session(system_prompt="Be brief.")
        controller.send(LONG)  # past the window's ring: pieces are read as the prompt passes them
        if point != "restore":
            for cls, name, broken in POINTS[point]:
                monkeypatch.setattr(cls, name, broken)
        first = controller.generate_reply()
        session = controller.session_id
        monkeypatch.undo()
    assert first.role == "assistant" and first.stats is not None and first.stats.tokens_generated > 0
    if point == "restore" or (point == "capture" and arch == "llama"):  # a plain model captures no state
        assert not notices
    else:
        assert sum(BROKEN in notice for notice in notices) == 1, notices  # told once, not per checkpoint

    with controller_in(tmp_path, store, notices) as controller:  # a reopen: only checkpoints on disk
        controller.load_model(model_of(arch))
        controller.open_session(session)
        assert [m.text for m in controller.snapshot().path if m.role == "assistant"] == [first.text]
        if point == "restore":
            for cls, name, broken in POINTS[point]:
                monkeypatch.setattr(cls, name, broken)
        question = controller.regenerate(first.id)
        assert question.role == "user"
        regenerated = controller.generate_reply()
        assert regenerated.id != first.id
        assert regenerated.text == first.text  # greedy: the same reply, from an exact state
        controller.send("And the stars?")
        assert controller.generate_reply().stats.tokens_generated > 0
    if not (point == "capture" and arch == "llama"):
        assert any(BROKEN in notice for notice in notices)
