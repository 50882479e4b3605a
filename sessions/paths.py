"""Where llamachat keeps its files, in one place.

Every location comes from platformdirs and can be overridden by an environment variable,
so tests (and users with unusual set-ups) never touch the real user directories:

- ``LLAMACHAT_CONFIG``: the config file itself.
- ``LLAMACHAT_DATA_DIR``: the session database.
- ``LLAMACHAT_CACHE_DIR``: made models and checkpoint files.
- ``LLAMACHAT_MODEL_CACHE``: made models only (see ``made_models_dir``).

Nothing is created at import time; ``ensure_private_dir`` creates a directory (0700) when
a caller is about to write into it.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

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


def data_dir() -> Path:
    """Where the session database lives."""
    override = os.environ.get("LLAMACHAT_DATA_DIR")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_data_dir(APP_NAME))


def cache_dir() -> Path:
    """Root of everything that can be rebuilt: made models and checkpoints."""
    override = os.environ.get("LLAMACHAT_CACHE_DIR")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_cache_dir(APP_NAME))


def database_file() -> Path:
    return data_dir() / "sessions.sqlite3"


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


def ensure_private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) readable only by the user, and return it.

    Conversations are private: the directories holding them are 0700 even when the
    user's umask is permissive. An existing directory is tightened too.
    """
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        os.chmod(path, 0o700)
    except OSError:
        pass
    return path
