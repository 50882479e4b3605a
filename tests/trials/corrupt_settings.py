"""A damaged config file or theme file: the program starts anyway and says where.

These files are edited by hand and synced between machines, so they break in every
way a text file can. A broken config must cost at most the settings it touches (all
of them for a syntax error), with a message naming the line, and the command line
must still run and print that message as a warning. A broken theme file is skipped
with a message naming the file, and every other theme still loads.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sessions.config import Config, load_config

REPO = Path(__file__).resolve().parents[2]
GOOD_LINES = ["# my settings", "n_ctx = 4096", "threads = 2", "", "[sampling]", "temperature = 0.5"]
CONFIG_KINDS = ("syntax-error", "bad-value", "not-utf8", "table-as-value")
THEME_KINDS = ("not-toml", "no-primary", "bad-colour", "not-utf8", "unknown-setting")
GOOD_THEME = 'name = "trial-good"\ndark = true\nprimary = "#5fa8d3"\n'


@dataclass(frozen=True)
class SettingsOutcome:
    target: str
    """"config" or "theme"."""
    kind: str
    detected: bool
    message: str | None
    names_place: bool
    """The message names the line (config) or the file (theme)."""
    started: bool
    """The settings still loaded: defaults (and the valid fields) / the other themes."""

    @property
    def ok(self) -> bool:
        return self.detected and self.names_place and self.started


def broken_config(kind: str) -> tuple[bytes, int | None]:
    """The file's bytes and the line the message must name (None: the whole file)."""
    lines = list(GOOD_LINES)
    if kind == "syntax-error":
        lines.insert(2, "n_batch = = 64")
        return "\n".join(lines).encode(), 3
    if kind == "bad-value":
        lines.insert(3, 'n_batch = "many"')
        return "\n".join(lines).encode(), 4
    if kind == "table-as-value":
        lines.insert(1, 'checkpoints = "on"')
        return "\n".join(lines).encode(), 2
    return b"n_ctx = 4096\n\xff\xfe\x00garbage\x80\n", None


def run_config_trial(workdir: Path, kind: str) -> SettingsOutcome:
    path = workdir / f"config-{kind}" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    data, line = broken_config(kind)
    path.write_bytes(data)
    loaded = load_config(path)
    problem = loaded.problems[0] if loaded.problems else None
    names_line = problem is not None and (line is None or problem.line == line)
    if kind in ("syntax-error", "not-utf8"):
        started = loaded.config == Config()
    else:  # one bad field: the valid ones are kept
        started = loaded.config.n_ctx == 4096 and loaded.config.sampling.temperature == 0.5
    env = dict(os.environ, LLAMACHAT_CONFIG=str(path), LLAMACHAT_DATA_DIR=str(path.parent / "data"))
    done = subprocess.run([sys.executable, "-m", "sessions.cli", "sessions"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    place = f"line {line}" if line is not None else "cannot read"
    warned = done.returncode == 0 and f"warning: {path}: " in done.stderr and place in done.stderr
    return SettingsOutcome("config", kind, problem is not None, str(problem) if problem else None,
                           names_line and warned, started and done.returncode == 0)


def broken_theme(kind: str) -> bytes:
    return {
        "not-toml": b'name = "broken"\nprimary = "#5fa8d3\n',
        "no-primary": b'name = "broken"\ndark = true\n',
        "bad-colour": b'name = "broken"\nprimary = "not a colour"\n',
        "not-utf8": b'name = "broken"\nprimary = "\xff\xfe"\n',
        "unknown-setting": b'name = "broken"\nprimary = "#5fa8d3"\nsparkles = true\n',
    }[kind]


def run_theme_trial(workdir: Path, kind: str) -> SettingsOutcome:
    from tui.theme_loader import load_themes

    folder = workdir / f"themes-{kind}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "good.toml").write_text(GOOD_THEME)
    broken = folder / "broken.toml"
    broken.write_bytes(broken_theme(kind))
    package_themes, package_problems = load_themes(workdir / "no-user-themes")
    themes, problems = load_themes(folder)
    names = {theme.name for theme in themes}
    mine = [p for p in problems if p not in package_problems]
    message = mine[0] if mine else None
    started = "trial-good" in names and "broken" not in names and len(themes) == len(package_themes) + 1
    return SettingsOutcome("theme", kind, message is not None, message,
                           message is not None and str(broken) in message and "skipped" in message, started)
