"""A shared folder given as the data or cache folder keeps its permissions.

``LLAMACHAT_DATA_DIR=/srv/team`` used to chmod the team's folder to 0700, locking the
team out of it. llamachat now never changes a folder it did not make: in a folder open
to others (or someone else's), it makes a private ``llamachat`` folder of its own and
keeps its files there, and it refuses a folder of another user's where it would write.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from sessions import paths
from sessions.store import SessionStore
from tests.store_child import REPO


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def shared(tmp_path):
    folder = tmp_path / "team"
    folder.mkdir()
    folder.chmod(0o777)
    return folder


def test_a_shared_data_folder_gets_a_private_folder_inside_and_keeps_its_mode(shared, monkeypatch):
    monkeypatch.setenv("LLAMACHAT_DATA_DIR", str(shared))
    with SessionStore.open() as store:
        store.create_session(title="private")
        assert store.path == shared / "llamachat" / "sessions.sqlite3"
    assert mode(shared) == 0o777
    assert mode(shared / "llamachat") == 0o700
    assert mode(shared / "llamachat" / "sessions.sqlite3") == 0o600


def test_a_shared_cache_folder_too(shared, monkeypatch):
    monkeypatch.setenv("LLAMACHAT_CACHE_DIR", str(shared))
    assert paths.checkpoints_dir() == shared / "llamachat" / "checkpoints"
    paths.ensure_private_dir(paths.checkpoints_dir())
    assert mode(shared) == 0o777 and mode(shared / "llamachat") == 0o700


def test_a_private_folder_or_one_already_holding_the_database_is_used_as_it_is(tmp_path, shared, monkeypatch):
    own = tmp_path / "mine"
    own.mkdir(mode=0o700)
    monkeypatch.setenv("LLAMACHAT_DATA_DIR", str(own))
    assert paths.data_dir() == own
    (shared / "sessions.sqlite3").touch()  # chats from before: they stay where they are
    monkeypatch.setenv("LLAMACHAT_DATA_DIR", str(shared))
    assert paths.data_dir() == shared
    missing = tmp_path / "new"  # made by llamachat itself, private
    monkeypatch.setenv("LLAMACHAT_DATA_DIR", str(missing))
    assert paths.data_dir() == missing
    SessionStore.open().close()
    assert mode(missing) == 0o700 and (missing / "sessions.sqlite3").is_file()


def test_the_command_line_leaves_a_shared_folder_alone(shared):
    env = dict(os.environ, LLAMACHAT_DATA_DIR=str(shared))
    done = subprocess.run([sys.executable, "-m", "sessions.cli", "sessions"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert mode(shared) == 0o777 and (shared / "llamachat" / "sessions.sqlite3").is_file()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a folder of another user's needs root")
def test_a_private_folder_planted_by_another_user_is_refused(shared, monkeypatch):
    planted = shared / "llamachat"
    planted.mkdir(mode=0o777)
    os.chown(planted, 65534, 65534)
    monkeypatch.setenv("LLAMACHAT_DATA_DIR", str(shared))
    with pytest.raises(PermissionError, match="belongs to another user"):
        SessionStore.open()
    assert not (planted / "sessions.sqlite3").exists()


def test_a_cache_folder_being_made_is_never_seen_open(tmp_path, monkeypatch):
    """While the checkpoint folder and the cache folder above it are made, another thread
    asking where the cache is must get the same answer as before and after: a parent made
    with the umask's mode, even for a moment, would send it to the ``llamachat`` subfolder."""
    import os

    from sessions import paths

    given = tmp_path / "cache"
    monkeypatch.setenv("LLAMACHAT_CACHE_DIR", str(given))
    before = paths.checkpoints_dir()
    seen: list = []
    real_mkdir = os.mkdir

    def mkdir(path, *args, **kwargs):
        seen.append(paths.checkpoints_dir())  # what another thread would be told right now
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    paths.ensure_private_dir(before)
    assert seen and set(seen) == {before}
    assert paths.checkpoints_dir() == before == given / "checkpoints"
