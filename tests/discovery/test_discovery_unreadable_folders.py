"""Folders the model search cannot enter are said, never a traceback or silence.

``Path.is_dir`` raises ``PermissionError`` (it swallows only "no such file" kinds of
error) when a parent of the folder cannot be searched: a ``model_dirs`` entry on another
user's disk ended the model list in a traceback. A configured folder that does not exist
(a typo) or a folder inside the search that cannot be read was skipped without a word,
leaving "why is my model not here?" unanswered; both are now listed with the reason.

Root ignores permissions, so as root the search runs in a child process without the
capabilities that let it (``setpriv``), where the permission bits apply to it too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from sessions.config import Config
from sessions.discovery import discover_models
from tests.gguf_support import make_gguf

LIST = ("import json, sys; from sessions.config import Config; from sessions.discovery import discover_models; "
        "print(json.dumps([[str(c.path), c.error] for c in discover_models(Config(model_dirs=sys.argv[1:]))]))")


def _discover_without_privileges(*folders) -> dict[str, str | None]:
    command = [sys.executable, "-c", LIST, *map(str, folders)]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root ignores permissions and setpriv is not there to drop that")
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_a_configured_folder_that_does_not_exist_is_listed_as_such(home, tmp_path):
    make_gguf(tmp_path / "models" / "good.gguf", name="Good")
    missing = tmp_path / "Modles"

    cards = discover_models(Config(model_dirs=[str(tmp_path / "models"), str(missing)]))

    errors = {card.path: card.error for card in cards}
    assert errors[tmp_path / "models" / "good.gguf"] is None
    assert "model_dirs" in errors[missing] and "does not exist" in errors[missing]


def test_a_configured_file_is_not_taken_for_a_folder(home, tmp_path):
    model = make_gguf(tmp_path / "one.gguf", name="One")
    [card] = discover_models(Config(model_dirs=[str(model)]))
    assert card.path == model and "not a folder" in card.error


def test_folders_that_cannot_be_searched_or_read_are_listed_with_the_reason(home, tmp_path):
    make_gguf(tmp_path / "models" / "good.gguf", name="Good")
    make_gguf(tmp_path / "models" / "private" / "hidden.gguf", name="Hidden")
    make_gguf(tmp_path / "locked" / "inner" / "far.gguf", name="Far")
    (tmp_path / "models" / "private").chmod(0)
    (tmp_path / "locked").chmod(0)
    try:
        found = _discover_without_privileges(tmp_path / "models", tmp_path / "locked" / "inner")
    finally:
        (tmp_path / "models" / "private").chmod(0o755)
        (tmp_path / "locked").chmod(0o755)
    assert found[str(tmp_path / "models" / "good.gguf")] is None
    assert "permission denied" in found[str(tmp_path / "models" / "private")]
    assert "permission denied" in found[str(tmp_path / "locked" / "inner")]
    assert len(found) == 3
