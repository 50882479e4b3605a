"""What the command line returns when no subcommand is given: the settings the app runs
with and what it opens first (the entry point, ``tui.entry``, starts the app with it)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from sessions.api.settings import Config


@dataclass(frozen=True)
class LaunchOptions:
    config: Config
    """``config.toml`` with the command-line flags applied."""
    config_path: Path
    config_problems: tuple[str, ...] = ()
    """What was wrong in ``config.toml`` (already printed; the app shows them again)."""
    demo: bool = False
    """``--demo``: make the demo model and start a new chat with it."""
    model_path: Path | None = None
    """``-m``: start a new chat with this model."""
    session_id: int | None = None
    """``--session``: reopen this session."""

    @classmethod
    def from_args(cls, args: argparse.Namespace, config: Config, config_path: Path,
                  problems: tuple[str, ...] = ()) -> LaunchOptions:
        model = getattr(args, "model", None)
        return cls(config=config, config_path=config_path, config_problems=problems,
                   demo=bool(getattr(args, "demo", False)),
                   model_path=Path(model).expanduser() if model else None,
                   session_id=getattr(args, "session", None))

