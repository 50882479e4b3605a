"""A deleted chat's own checkpoint files go with it; a file deleted under a running store
is recomputed. Real engine, real files, on the sliding-window model (cells and snapshots).

The files a chat owns are found from the chat's stored tokens alone (``checkpoints.owners``),
so these tests first check that every file the engine wrote is found that way.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sessions.api.chat import EngineSettings, SessionController
from sessions.checkpoints import CheckpointStore, list_files, remove_files
from sessions.checkpoints.owners import ChatTokens, ownership
from sessions.engine.factory import llama_engine_factory
from sessions.events import NoticeRaised
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore
from sessions.synth import make_model

pytestmark = pytest.mark.engine

GREEDY = SamplingSettings(temperature=0.0, max_tokens=24)


@contextmanager
def controller(store: SessionStore, checkpoints: CheckpointStore, notices: list[str]) -> Iterator[SessionController]:
    def listen(event) -> None:
        if isinstance(event, NoticeRaised):
            notices.append(event.text)

    ctl = SessionController(store, engine_factory=llama_engine_factory(checkpoints), checkpoints=checkpoints,
                            settings=EngineSettings(n_ctx=1024, n_batch=64, threads=1, n_gpu_layers=0),
                            sampling=GREEDY, listener=listen, undo_seconds=0)
    try:
        ctl.load_model(make_model("gemma3", "tiny", swa_window=32))
        yield ctl
    finally:
        ctl.close()


def chat(ctl: SessionController, *questions: str) -> int:
    ctl.new_session(system_prompt="Be brief.")
    for question in questions:
        ctl.send(question)
        ctl.generate_reply()
    session_id = ctl.session_id
    assert session_id is not None
    return session_id


def on_disk(folder: Path) -> set[Path]:
    return {file.path for file in list_files(folder)}


def test_deleting_a_chat_removes_the_files_only_it_reaches(tmp_path) -> None:
    folder, notices = tmp_path / "checkpoints", []
    with SessionStore.open(tmp_path / "sessions.sqlite3") as store, \
            CheckpointStore(folder, ram_bytes=64 << 20, disk_bytes=1 << 30) as checkpoints, \
            controller(store, checkpoints, notices) as ctl:
        first = chat(ctl, "Tell me about the sea.", "And about rivers?")
        second = chat(ctl, "Tell me about the sea.")  # the same start: greedy, the same first reply
        assert checkpoints.flush(60)
        files = list_files(folder)
        assert checkpoints.stats().disk_count == len(files)
        a = ownership(store, [ChatTokens.read(store, first)], files)
        b = ownership(store, [ChatTokens.read(store, second)], files)
        assert a.own and a.shared and not b.own  # the second chat is the first one's beginning
        assert {f.path for f in a.own + a.shared} == {f.path for f in files}  # every file is named by a branch
        assert {f.path for f in b.shared} == {f.path for f in a.shared}
        assert {f.key[2] for f in a.own} == {"cells", "snapshot"}

        ctl.delete_session(first)
        assert ctl.wait_for_cleanup(60)
        assert on_disk(folder) == {f.path for f in a.shared}
        assert checkpoints.stats().disk_count == len(a.shared)  # the index knows
    assert notices == []


def test_files_deleted_under_a_running_store_are_recomputed(tmp_path) -> None:
    """Another process (``llamachat cache clear``) deletes files the store's index lists:
    the next restore finds them gone and decodes those tokens again, with the same reply,
    and nothing is reported as wrong. The smallest file of each kind stays, so that the
    layouts are learnt as the model loads (from those files) and the restore itself meets
    the missing ones."""
    folder, notices = tmp_path / "checkpoints", []
    with SessionStore.open(tmp_path / "sessions.sqlite3") as store, \
            CheckpointStore(folder, ram_bytes=0, disk_bytes=1 << 30, on_problem=notices.append) as checkpoints:
        with controller(store, checkpoints, notices) as ctl:
            session = chat(ctl, "Tell me about the sea.", "And about rivers?")
            before = ctl.snapshot().path[-1]  # type: ignore[union-attr]
        assert checkpoints.flush(60)
        files = list_files(folder)
        assert checkpoints.stats().disk_count == len(files)  # all listed, as on disk
        smallest = {min((f for f in files if f.key[2] == kind), key=lambda f: (f.size, f.key[1])).path
                    for kind in ("cells", "snapshot")}
        removed = remove_files(file for file in files if file.path not in smallest)
        assert removed.count == len(files) - 2
        with controller(store, checkpoints, notices) as ctl:
            ctl.open_session(session)
            ctl.regenerate(before.id)
            after = ctl.generate_reply()
        assert after.text == before.text
        assert after.stats is not None and after.stats.tokens_evaluated > 0
        stats = checkpoints.stats()
        assert stats.misses >= 1 and stats.corrupt_deleted == 0
    assert notices == []
