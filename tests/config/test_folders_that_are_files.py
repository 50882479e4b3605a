"""A file or a device where llamachat wants a folder: said in those words, and what can
go on without the folder goes on.

``LLAMACHAT_DATA_DIR`` holds the chats: a file or ``/dev/null`` there stops the command
with one sentence naming it (mkdir's "File exists" named nothing useful).
``LLAMACHAT_CACHE_DIR`` holds only what can be rebuilt: a file there keeps checkpoints in
memory, with one warning, and ``ask`` still answers. Real processes.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sessions.synth import make_model
from tests.ask_process import REPO


def llamachat(*argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sessions.cli", *argv], cwd=REPO, stdin=subprocess.DEVNULL,
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize(("kind", "words"), [("file", "not a folder but a file"),
                                              ("device", "not a folder but a device")])
def test_a_data_folder_that_is_a_file_is_one_sentence(tmp_path, kind, words):
    given = str(tmp_path / "notes.txt") if kind == "file" else os.devnull
    if kind == "file":
        (tmp_path / "notes.txt").write_text("mine\n")
    done = llamachat("sessions", LLAMACHAT_DATA_DIR=given)
    assert done.returncode == 1
    assert done.stderr == f"llamachat: error: {given}: {words}\n"
    if kind == "file":
        assert (tmp_path / "notes.txt").read_text() == "mine\n"


def test_a_file_under_the_data_folder_path_is_named(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    done = llamachat("sessions", LLAMACHAT_DATA_DIR=str(tmp_path / "notes.txt" / "chats"))
    assert done.stderr == f"llamachat: error: {tmp_path / 'notes.txt'}: not a folder but a file\n"


@pytest.mark.engine
def test_a_cache_folder_that_is_a_file_keeps_checkpoints_in_memory_and_ask_answers(tmp_path):
    model = str(make_model("llama", "tiny"))
    cache = tmp_path / "cache-is-a-file"
    cache.write_text("mine\n")
    done = llamachat("ask", "-m", model, "--temp", "0", "--max-tokens", "4", "hello", LLAMACHAT_CACHE_DIR=str(cache))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert done.stderr.splitlines() == [
        f"llamachat: warning: the checkpoint folder {cache / 'checkpoints'} cannot be used "
        "(not a folder but a file); checkpoints are kept in memory only"]
    assert cache.read_text() == "mine\n"


def test_the_checkpoint_folders_warning_is_kept_when_it_comes_before_the_controller(tmp_path, monkeypatch):
    """The checkpoint writer looks at its folder on its own thread as soon as the store
    opens; here it has finished (and found a file) before the controller is made, which a
    slow start allows. Its one warning is among the notices, not lost."""
    from sessions.api import runtime as runtime_module
    from sessions.api.chat import SessionController
    from sessions.config import Config
    from tests.tui.fake_engine import FakeEngineFactory

    cache = tmp_path / "cache-is-a-file"
    cache.write_text("mine\n")
    monkeypatch.setenv("LLAMACHAT_CACHE_DIR", str(cache))

    def slow_start(store, **options):
        options["checkpoints"]._disk.ensure_index()  # the writer's first look, done by now
        return SessionController(store, **options)

    monkeypatch.setattr(runtime_module, "SessionController", slow_start)
    heard = []
    with runtime_module.open_runtime(Config(), listener=heard.append, engine_factory=FakeEngineFactory()) as runtime:
        notices = list(runtime.notices)
    assert notices == [f"the checkpoint folder {cache / 'checkpoints'} cannot be used (not a folder but a file); "
                       "checkpoints are kept in memory only"]
    assert heard == []
