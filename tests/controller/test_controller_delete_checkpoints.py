"""The app's deletion of a chat (``SessionController.delete_session``) and its checkpoint files.

The files are those of ``tests.cli.test_cli_cache.Chats``: real files under the names the
engine gives them. No model is loaded: deleting a chat needs none. Most tests make the
deletion final at once (``undo_seconds=0``, as ``undo_minutes = 0``); by default the files
stay while the deletion can be undone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sessions import paths
from sessions.api.chat import SessionController
from sessions.checkpoints import CheckpointStore
from sessions.controller import checkpoint_cleanup
from sessions.events import NoticeRaised
from sessions.store import SessionNotFound
from tests.cli.test_cli_cache import A_OWN, Chats


def no_engine(*_args, **_kwargs):
    raise AssertionError("deleting a chat loads no model")


@pytest.fixture
def checkpoints():
    with CheckpointStore(paths.checkpoints_dir(), ram_bytes=1 << 20, disk_bytes=1 << 30) as opened:
        yield opened


def test_the_files_stay_while_the_deletion_can_be_undone_and_go_when_it_is_final(store) -> None:
    chats = Chats(store)
    with CheckpointStore(paths.checkpoints_dir(), ram_bytes=1 << 20, disk_bytes=1 << 30) as checkpoints:
        assert checkpoints.flush(30)
        ctl = SessionController(store, engine_factory=no_engine, checkpoints=checkpoints)
        ctl.delete_session(chats.a)
        assert ctl.wait_for_cleanup(30) and chats.present() == set(chats.files)  # it can come back: all kept
        ctl.undo_delete()
        assert ctl.session_id == chats.a
        ctl.delete_session(chats.a)
        ctl.close()  # the deletion is final now
        assert ctl.wait_for_cleanup(30)
        assert chats.present() == set(chats.files) - A_OWN


def test_the_deleted_chats_own_files_leave_the_disk_and_the_index(store) -> None:
    chats = Chats(store)
    notices: list[NoticeRaised] = []
    with CheckpointStore(paths.checkpoints_dir(), ram_bytes=1 << 20, disk_bytes=1 << 30) as checkpoints:
        assert checkpoints.flush(30) and checkpoints.stats().disk_count == len(chats.files)  # the index is built
        ctl = SessionController(store, engine_factory=no_engine, checkpoints=checkpoints, listener=notices.append,
                                undo_seconds=0)
        ctl.open_session(chats.a)
        ctl.delete_session(chats.a)
        assert ctl.session_id is None  # the deleted chat was open: a new one is
        assert ctl.wait_for_cleanup(30)
        assert chats.present() == set(chats.files) - A_OWN
        assert checkpoints.stats().disk_count == len(chats.files) - len(A_OWN)
        ctl.delete_session(chats.b)
        assert ctl.wait_for_cleanup(30)
        assert chats.present() == {"c.system", "nobody"}
        assert checkpoints.stats().disk_count == 2
        ctl.close()
    assert notices == []


def test_a_file_that_cannot_be_deleted_is_a_warning(store, checkpoints, monkeypatch) -> None:
    chats = Chats(store)
    notices: list[NoticeRaised] = []
    ctl = SessionController(store, engine_factory=no_engine, checkpoints=checkpoints, listener=notices.append,
                                undo_seconds=0)
    real_unlink = Path.unlink
    stuck = chats.files["a.next"]

    def unlink(path: Path, missing_ok: bool = False) -> None:
        if path == stuck:
            raise PermissionError(13, "Permission denied")
        real_unlink(path, missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    ctl.delete_session(chats.a)
    assert ctl.wait_for_cleanup(30)
    assert chats.present() == set(chats.files) - A_OWN | {"a.next"}
    assert [(n.level, n.text) for n in notices] == [
        ("warning", f"a checkpoint file of the deleted chat could not be removed: {stuck}: Permission denied")]
    ctl.close()


def test_a_failure_to_remove_the_files_is_a_warning_and_the_chat_stays_deleted(store, checkpoints,
                                                                               monkeypatch) -> None:
    chats = Chats(store)
    notices: list[NoticeRaised] = []
    ctl = SessionController(store, engine_factory=no_engine, checkpoints=checkpoints, listener=notices.append,
                                undo_seconds=0)

    def unreadable(*_args):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(checkpoint_cleanup, "ownership_on_disk", unreadable)
    ctl.delete_session(chats.a)
    assert ctl.wait_for_cleanup(30)
    with pytest.raises(SessionNotFound):
        store.get_session(chats.a)
    assert chats.present() == set(chats.files)
    [notice] = notices
    assert notice.level == "warning"
    assert notice.text == ("the checkpoint files of the deleted chat could not be removed ([Errno 5] Input/output "
                           "error); they will be evicted as the disk budget needs room")
    ctl.close()


def test_without_checkpoints_a_deletion_touches_no_file(store) -> None:
    chats = Chats(store)
    ctl = SessionController(store, engine_factory=no_engine)
    ctl.delete_session(chats.a)
    assert ctl.wait_for_cleanup(30)
    assert chats.present() == set(chats.files)
    ctl.close()
