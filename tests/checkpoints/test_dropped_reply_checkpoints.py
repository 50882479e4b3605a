"""The checkpoint files of a reply that was written but not stored are reclaimed first.

A reply's checkpoints are written as it ends, before it is stored. When storing it fails
(its question deleted in another window, a full disk), they belong to no message: nothing
leads to their token prefix again. They are leaves of no branch in use, the first files
the disk tier evicts, before any checkpoint of a branch the user is on and before newer
abandoned leaves. Real engine, real files: the same chat is run twice, once with room for
everything (to see which files the dropped reply left), once with a budget that must give
back part of them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sessions.api.chat import EngineSettings, SessionController
from sessions.engine.factory import llama_engine_factory
from sessions.errors import ReplyNotSaved
from sessions.events import TextStreamed
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from sessions.synth import make_model
from tests.store_child import StoreProcess

pytestmark = pytest.mark.engine

GREEDY = SamplingSettings(temperature=0.0, max_tokens=48)


def files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


def chat(workdir: Path, budget: int) -> tuple[set[str], dict[str, int], int]:
    """Ask, have the second reply dropped, ask again; returns (files the dropped reply left,
    files at the end, evictions)."""
    from sessions.checkpoints import CheckpointStore

    folder = workdir / "checkpoints"
    db = workdir / "sessions.sqlite3"
    checkpoints = CheckpointStore(folder, ram_bytes=64 << 20, disk_bytes=budget)
    store = SessionStore.open(db)
    other = StoreProcess(db)
    doomed: list[int] = []

    def listen(event) -> None:  # another window deletes the question while its reply streams
        if isinstance(event, TextStreamed) and doomed:
            assert other("open")["ok"] and other("delete_subtree", message=doomed.pop())["ok"]

    controller = SessionController(store, engine_factory=llama_engine_factory(checkpoints), listener=listen,
                                   settings=EngineSettings(n_ctx=1024, n_batch=64, threads=1), sampling=GREEDY)
    try:
        controller.load_model(make_model("llama", "tiny"))
        controller.new_session(system_prompt="Be brief.")
        controller.send("Tell me about the sea.")
        controller.generate_reply()
        checkpoints.flush()
        before = files(folder)
        doomed.append(controller.send("And about the mountains?").id)
        with pytest.raises(ReplyNotSaved, match="was deleted in another window"):
            controller.generate_reply()
        checkpoints.flush()
        dropped = set(files(folder)) - set(before)
        controller.send("Then tell me about rivers.")  # on the branch still in use
        controller.generate_reply()
        checkpoints.flush()
        return dropped, files(folder), checkpoints.stats().evictions
    finally:
        controller.close()
        checkpoints.close()
        store.close()
        with other:
            pass


def test_a_dropped_replys_checkpoints_are_evicted_first(tmp_path):
    (tmp_path / "roomy").mkdir()
    dropped, everything, evictions = chat(tmp_path / "roomy", budget=1 << 30)
    assert dropped and evictions == 0
    dropped_bytes = sum(everything[name] for name in dropped)
    (tmp_path / "tight").mkdir()
    _, kept, evictions = chat(tmp_path / "tight", budget=sum(everything.values()) - dropped_bytes // 2)
    assert evictions >= 1
    assert set(everything) - dropped <= set(kept)  # the branch in use, and the newer reply, all kept
    assert dropped - set(kept)  # what was given back came from the dropped reply
