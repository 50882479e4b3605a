"""The walk-through of issue 48 in tmux: the real ``llamachat --demo`` (real llama.cpp, the
demo model) in a real terminal, at 140×42, 80×24 and 50×16, read back as tmux draws it.

What a Pilot cannot see is checked here: the Alt keys as a terminal sends them (ESC and
the letter) with the tree focused, and what the terminal shows at each size: messages in
the branch's order after a send, a regenerate and another send, a footer that cuts no
key, a status bar and tree lines that end in "…" where they are cut. tmux is needed; the
test says so and skips where it is absent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.pty_app import llamachat_command

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")

LIMIT_SECONDS = 120.0
FOOTER_KEYS = ("Send", "Stop", "Edit", "Regenerate", "Tree", "Quit", "Help")


class Tmux:
    """One tmux server of its own (``-L``), one window running the app."""

    def __init__(self, folder: Path, size: tuple[int, int], env: dict[str, str]) -> None:
        self.socket = f"llamachat-walk-{os.getpid()}"
        command = " ".join([*llamachat_command(), "--demo"])
        exports = " ".join(f"{key}={value}" for key, value in env.items())
        self._tmux("-f", "/dev/null", "new-session", "-d", "-s", "walk", "-x", str(size[0]), "-y", str(size[1]),
                   f"env {exports} TERM=xterm-256color {command}; sleep 30")
        self._tmux("set-option", "-g", "window-size", "manual")
        self.resize(size)

    def _tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True, capture_output=True, text=True).stdout

    def screen(self) -> list[str]:
        return self._tmux("capture-pane", "-p", "-t", "walk").splitlines()

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "walk", *keys)

    def type(self, text: str) -> None:
        self._tmux("send-keys", "-t", "walk", "-l", text)

    def resize(self, size: tuple[int, int]) -> None:
        self._tmux("resize-window", "-t", "walk", "-x", str(size[0]), "-y", str(size[1]))

    def wait(self, condition: Callable[[list[str]], bool], what: str) -> list[str]:
        deadline = time.monotonic() + LIMIT_SECONDS
        while True:
            lines = self.screen()
            if condition(lines):
                return lines
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n" + "\n".join(lines))
            time.sleep(0.1)  # tmux has no event to wait on: its screen is polled

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)


@pytest.fixture
def tmux(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("[sampling]\nmax_tokens = 24\ntemperature = 0.0\n")  # short replies, the same each run
    env = {"LLAMACHAT_CONFIG": str(config), "LLAMACHAT_DATA_DIR": str(tmp_path / "data"),
           "LLAMACHAT_CACHE_DIR": str(tmp_path / "cache"), "HOME": str(tmp_path / "home"),
           "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.environ["PATH"],
           "LLAMACHAT_MODEL_CACHE": os.environ.get("LLAMACHAT_MODEL_CACHE", str(tmp_path / "models"))}
    if not Path(llamachat_command()[0]).exists() and llamachat_command()[0] != sys.executable:
        pytest.skip("no llamachat command to run")
    session = Tmux(tmp_path, (140, 42), env)
    try:
        yield session
    finally:
        session.close()


def idle(lines: list[str]) -> bool:
    """The model loaded and no reply being written."""
    return any("llamachat made" in line for line in lines) and not any("writing…" in line for line in lines)


def row(lines: list[str], words: str, start: int = 0) -> int:
    return next(index for index, line in enumerate(lines) if index >= start and words in line)


def assert_in_order(lines: list[str]) -> None:
    """You "Say hi." / Assistant ‹2/2› / You "Say bye." / Assistant, top to bottom, as far
    as the screen shows them (a narrow one shows the end)."""
    marks = [("Say hi.", "Say hi."), ("‹ 2/2 ›", "2/2"), ("Say bye.", "Say bye.")]
    found = [(row(lines, text), name) for text, name in marks if any(text in line for line in lines)]
    assert [name for _, name in sorted(found)] == [name for _, name in found], "\n".join(lines)
    if any("Say bye." in line for line in lines):
        assert any("Assistant" in line for line in lines[row(lines, "Say bye."):]), "\n".join(lines)


def assert_nothing_cut(lines: list[str]) -> None:
    """The footer ends with a whole key; the status bar ends whole or with "…"."""
    lines = [line for line in lines if line.strip()] or [""]  # tmux leaves rows the app did not draw blank
    footer, status = lines[-1], lines[-2]
    keys = footer.split("▏")[0].rstrip()
    assert keys.endswith(FOOTER_KEYS), "a key cut in the footer:\n" + "\n".join(lines)
    assert footer.rstrip().endswith("palette"), footer
    assert status.rstrip().endswith((")", "…", "tok/s")), f"the status bar cut mid-word: {status!r}"


def test_the_walkthrough_in_tmux_at_three_sizes(tmux):
    lines = tmux.wait(lambda lines: idle(lines) and any("Demo model" in line for line in lines), "the demo model")
    assert len(lines) == 42 and max(map(len, lines)) <= 140, "\n".join(lines)
    tmux.type("Say hi.")
    tmux.keys("Enter")
    lines = tmux.wait(lambda lines: idle(lines) and any("Assistant" in line for line in lines), "the reply")
    tmux.keys("C-r")  # a second version of the reply
    lines = tmux.wait(lambda lines: idle(lines) and any("‹ 2/2 ›" in line for line in lines), "the new version")
    tmux.type("Say bye.")
    tmux.keys("Enter")
    lines = tmux.wait(lambda lines: idle(lines) and any("Say bye." in line for line in lines)
                      and any("Assistant" in line for line in lines[row(lines, "Say bye."):]), "the second reply")
    assert_in_order(lines)
    assert_nothing_cut(lines)

    for key, shown in (("M-s", "Find text in this chat"), ("M-a", "Attach a text file"),
                       ("M-r", "How many new versions")):
        tmux.keys("C-t")  # the tree, focused: an Alt key is a key, not typing
        tmux.wait(lambda lines: any("branches" in line for line in lines), "the tree")
        tmux.keys(key)
        lines = tmux.wait(lambda lines, shown=shown: any(shown in line for line in lines), f"{key} to open {shown}")
        assert not any(line.rstrip().endswith(f"▎ {key[-1]}") for line in lines), f"{key} typed its letter"
        tmux.keys("Escape")
        tmux.wait(lambda lines, shown=shown: not any(shown in line for line in lines), f"{shown} closed")
        tmux.keys("C-t")  # the tree closed again
        tmux.wait(lambda lines: not any("branches" in line for line in lines), "the tree closed")

    for size in ((80, 24), (50, 16)):
        tmux.resize(size)
        lines = tmux.wait(lambda lines, size=size: len(lines) == size[1] and len(lines[-1]) <= size[0],
                          f"the screen at {size}")
        lines = tmux.wait(lambda lines: assert_quietly(assert_nothing_cut, lines), f"a whole footer at {size}")
        assert_in_order(lines)
    lines = tmux.screen()
    tree_lines = [line for line in lines if ("✦" in line or "❯" in line) and "│▏" in line]
    for line in tree_lines:  # at 50 columns the tree shows text beside its marks
        text = line.split("│▏", 1)[1]
        assert sum(char.isalpha() for char in text) >= 3 or text.rstrip().endswith("…"), line


def assert_quietly(check: Callable[[list[str]], None], lines: list[str]) -> bool:
    try:
        check(lines)
    except AssertionError:
        return False
    return True
