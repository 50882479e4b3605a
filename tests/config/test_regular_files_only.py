"""Only regular files where regular files are expected: a FIFO never hangs llamachat.

A FIFO blocks whoever opens it for reading until a writer comes, which may be never.
``config.toml``, a theme and a file named like a checkpoint are each made a real FIFO
here, and the real program runs against it under a time limit: it must say so in one
sentence (or, for a checkpoint, go on without it) instead of waiting. A symlinked
``config.toml`` (kept with the user's dotfiles) stays a link when a setting is saved.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sessions.config import load_config, update_config
from sessions.synth import make_model
from tests.ask_process import REPO

LIMIT = 60.0
"""Far more than any of these commands takes; a hang fails the test after this long."""


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sys.executable, *argv], cwd=REPO, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=LIMIT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{argv} hung on a FIFO")


def test_a_fifo_config_is_refused_in_one_sentence(private_dirs):
    config = Path(os.environ["LLAMACHAT_CONFIG"])
    config.parent.mkdir(parents=True)
    os.mkfifo(config)
    done = run("-m", "sessions.cli", "sessions")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        f"llamachat: warning: {config}: cannot read {config}: not a regular file (a pipe or a device); "
        "using all defaults")


def test_a_fifo_theme_is_skipped_in_one_sentence(private_dirs):
    themes = Path(os.environ["LLAMACHAT_CONFIG"]).parent / "themes"
    themes.mkdir(parents=True)
    os.mkfifo(themes / "night.toml")
    done = run("-c", "from tui.theme_loader import load_themes\nfor p in load_themes()[1]: print(p)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"theme file {themes / 'night.toml'}: it is not a regular file (a pipe or a device cannot hold a theme); "
        "it was skipped"]


@pytest.mark.engine
def test_fifos_named_like_checkpoints_do_not_stop_ask(private_dirs):
    model = str(make_model("llama", "tiny"))
    first = run("-m", "sessions.cli", "ask", "-m", model, "--temp", "0", "--max-tokens", "8", "hello there")
    assert first.returncode == 0, first.stderr
    files = [p for p in (Path(os.environ["LLAMACHAT_CACHE_DIR"]) / "checkpoints").rglob("*")
             if p.suffix in (".ckpt", ".snap")]
    assert files
    for path in files:
        path.unlink()
        os.mkfifo(path)
    again = run("-m", "sessions.cli", "ask", "-m", model, "--temp", "0", "--max-tokens", "8",
                "--session", "1", "--regenerate", "2")
    assert again.returncode == 0, again.stderr
    assert all(Path(path).exists() for path in files)  # not ours to delete: only passed over


def test_a_fifo_where_the_backup_goes_is_replaced_by_a_backup(private_dirs):
    from sessions.store import SessionStore
    from sessions.store.backup import backup_made, backup_path

    with SessionStore.open() as store:
        store.create_session(title="kept")
    bak = backup_path(store.path)
    os.mkfifo(bak)
    done = run("-m", "sessions.cli", "sessions")
    assert done.returncode == 0, done.stderr
    assert bak.is_file() and backup_made(bak) is not None


def test_saving_a_setting_keeps_a_symlinked_config_a_link(tmp_path):
    target = tmp_path / "dotfiles" / "llamachat.toml"
    target.parent.mkdir()
    target.write_text('model = "/models/a.gguf"\n')
    link = tmp_path / "config" / "config.toml"
    link.parent.mkdir()
    link.symlink_to(target)
    update_config(path=link, theme="nord")
    assert link.is_symlink() and link.resolve() == target
    assert load_config(target).config.theme == "nord"
    assert load_config(target).config.model == "/models/a.gguf"
