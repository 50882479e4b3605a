"""Where llamachat keeps its files, in one place.

Every location comes from platformdirs and can be overridden by an environment variable,
so tests (and users with unusual set-ups) never touch the real user directories:

- ``LLAMACHAT_CONFIG``: the config file itself.
- ``LLAMACHAT_DATA_DIR``: the session database.
- ``LLAMACHAT_CACHE_DIR``: made models and checkpoint files.
- ``LLAMACHAT_MODEL_CACHE``: made models only (see ``made_models_dir``).

Nothing is created at import time; ``ensure_private_dir`` creates a directory (0700) when
a caller is about to write into it.

A folder given through a variable may be shared (``/tmp``, a team folder, a synced
drive). llamachat never changes the permissions of a folder it did not make: when the
given folder exists and is open to others (or belongs to someone else), llamachat keeps
its files in a private ``llamachat`` folder of its own inside it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import platformdirs

from sessions.errors import LlamachatError

APP_NAME = "llamachat"


def config_file() -> Path:
    """The TOML config file (it may not exist yet)."""
    override = os.environ.get("LLAMACHAT_CONFIG")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def config_dir() -> Path:
    """The folder beside the config file: user themes live in ``themes/`` inside it."""
    return config_file().parent


DATABASE_NAME = "sessions.sqlite3"


def data_dir() -> Path:
    """Where the session database lives."""
    override = os.environ.get("LLAMACHAT_DATA_DIR")
    if override:
        return _own_folder(Path(override).expanduser(), DATABASE_NAME)
    return Path(platformdirs.user_data_dir(APP_NAME))


def cache_dir() -> Path:
    """Root of everything that can be rebuilt: made models and checkpoints."""
    override = os.environ.get("LLAMACHAT_CACHE_DIR")
    if override:
        return _own_folder(Path(override).expanduser(), "checkpoints")
    return Path(platformdirs.user_cache_dir(APP_NAME))


def _own_folder(given: Path, marker: str) -> Path:
    """``given`` if llamachat may keep private files right in it, else its ``llamachat``
    subfolder: a folder that exists, is open to others or is someone else's, and does not
    already hold llamachat's files (``marker``) from an earlier run."""
    try:
        info = given.stat()
    except OSError:
        return given  # made by llamachat itself (0700) when first needed
    if not stat.S_ISDIR(info.st_mode) or (given / marker).exists():
        return given
    if info.st_uid == os.geteuid() and not info.st_mode & 0o077:
        return given
    return given / APP_NAME


def database_file() -> Path:
    return data_dir() / DATABASE_NAME


def made_models_dir() -> Path:
    """Random-weight GGUFs made by ``sessions.synth`` (demo and test models).

    ``LLAMACHAT_MODEL_CACHE`` moves only this folder: the test suite points it at one
    folder for the whole run so each model is made once, while every test still gets a
    private cache for checkpoints.
    """
    override = os.environ.get("LLAMACHAT_MODEL_CACHE")
    if override:
        return Path(override).expanduser()
    return cache_dir() / "models"


def checkpoints_dir() -> Path:
    """The disk tier of the checkpoint store."""
    return cache_dir() / "checkpoints"


class NotAFolder(LlamachatError, NotADirectoryError):
    """A file, a device or a pipe where llamachat wants a folder."""

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(errno.ENOTDIR, f"not a folder but {what}", str(path))


def _refuse_non_folder(path: Path) -> None:
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # mkdir says what is wrong
    if stat.S_ISDIR(mode):
        return
    if stat.S_ISREG(mode):
        raise NotAFolder(path, "a file")
    raise NotAFolder(path, "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a pipe or a socket")


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) readable only by the user, and return it.

    Conversations are private: the directories llamachat makes are 0700 even when the
    user's umask is permissive. A directory that already exists keeps its permissions
    (it may be a folder others use; see ``data_dir``), but one that belongs to another
    user is refused: whoever owns it could read everything written into it. A file or a
    device where a folder should be (a variable set to the wrong path, ``/dev/null``) is
    refused in those words (``NotAFolder``), not in mkdir's "File exists".
    """
    missing = []
    step = path
    while not step.exists() and step != step.parent:
        missing.append(step)
        step = step.parent
    _refuse_non_folder(step)
    # Each folder is made 0700 itself, outermost first: ``mkdir(parents=True)`` makes the
    # parents with the umask's mode, and another thread asking ``cache_dir`` in between
    # would see an open folder and move to its ``llamachat`` subfolder.
    for made in reversed(missing):
        try:
            made.mkdir(mode=0o700)
        except FileExistsError:
            continue  # made by another thread or process meanwhile
        try:
            os.chmod(made, 0o700)  # the mode of mkdir is masked by the umask
        except OSError:
            pass
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    info = path.stat()
    if info.st_uid != os.geteuid():
        raise PermissionError(f"{path} belongs to another user; llamachat keeps its files only in "
                              "folders of its own")
    return path
