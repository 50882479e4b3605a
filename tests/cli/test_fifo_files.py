"""A FIFO where llamachat reads one of its own files: refused or passed over, never waited on.

A FIFO blocks a read until a writer comes, for ever when none does. Each file of the data,
cache and config folders that llamachat reads, and the Hugging Face cache entry it reads
offline, is replaced by one; the command that reads it must end, in real processes under
a deadline, and a file it can do without is passed over while one it needs is refused in
one sentence.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sessions import paths
from sessions.synth import make_model
from tests.cli_support import assert_one_line_error

DEADLINE = 60


def llamachat(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, "-m", "sessions.cli", *argv], capture_output=True, text=True,
                              env=env or os.environ.copy(), stdin=subprocess.DEVNULL, timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`llamachat {' '.join(argv)}` waited on the FIFO for {DEADLINE} s")


def fifo_at(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(path):
        path.unlink()
    os.mkfifo(path)
    return path


@pytest.fixture
def chat(tmp_path) -> Path:
    """A session database with one chat in it."""
    from sessions.store import SessionStore

    with SessionStore.open() as store:
        session = store.create_session(title="kept")
        store.add_message(session.id, None, "user", "What is a llama?")
    return paths.database_file()


def test_a_fifo_recovery_notice_is_passed_over(chat):
    fifo_at(chat.with_name(chat.name + ".recovery-notice"))
    done = llamachat("sessions")
    assert done.returncode == 0 and "kept" in done.stdout, done.stderr


@pytest.mark.parametrize("side", ["-wal", "-shm"])
def test_a_fifo_beside_the_database_is_refused_in_one_sentence(chat, side):
    fifo = fifo_at(chat.with_name(chat.name + side))
    done = llamachat("sessions")
    assert_one_line_error(done.returncode, done.stdout, done.stderr,
                          f"{fifo} beside it is not a regular file (a pipe or a device); remove it")


def test_llamachat_config_on_a_fifo_says_so(tmp_path):
    fifo = fifo_at(tmp_path / "config" / "config.toml")
    done = llamachat("config")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (f"llamachat: error: could not read the config file {fifo}: "
                                            "not a regular file (a pipe or a device)")


@pytest.mark.engine
def test_a_fifo_list_of_probed_models_is_passed_over(tmp_path):
    foreign = tmp_path / "elsewhere" / "model.gguf"  # not made by llamachat: probed before its load
    foreign.parent.mkdir()
    shutil.copyfile(make_model("llama", "tiny"), foreign)
    fifo = fifo_at(paths.ensure_private_dir(paths.cache_dir()) / "probed-models.json")
    done = llamachat("ask", "-m", str(foreign), "--temp", "0", "--max-tokens", "3", "hello")
    assert done.returncode == 0 and done.stdout.strip(), done.stderr
    assert fifo.is_file()  # the list written anew in its place


def test_a_fifo_list_of_recent_downloads_is_passed_over(fake_hub, tmp_path):
    fake_hub.add("org/tiny-GGUF", {"tiny-Q4_K_M.gguf": make_model("llama", "tiny")})
    fifo = fifo_at(paths.ensure_private_dir(paths.data_dir()) / "recent_downloads.json")
    done = llamachat("pull", "org/tiny-GGUF")
    assert done.returncode == 0 and done.stdout.strip().endswith("tiny-Q4_K_M.gguf"), done.stderr
    assert fifo.is_file()  # the list written anew in its place


def test_a_fifo_ref_in_the_hugging_face_cache_is_passed_over_offline(fake_hub, tmp_path, monkeypatch):
    fake_hub.add("org/tiny-GGUF", {"tiny-Q4_K_M.gguf": make_model("llama", "tiny")})
    assert llamachat("pull", "org/tiny-GGUF").returncode == 0
    fifo_at(tmp_path / "hf-home" / "hub" / "models--org--tiny-GGUF" / "refs" / "main")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the Hub out of reach: the cache is read
    done = llamachat("pull", "org/tiny-GGUF")
    assert_one_line_error(done.returncode, done.stdout, done.stderr, "could not reach http://127.0.0.1:9")
