"""The ``llamachat`` command line: global flags, subcommands, and the door to the app.

``tui.launch.main`` calls ``main(argv, run_app=...)``; without a subcommand ``main``
hands ``run_app`` a ``LaunchOptions`` (the config with the flags applied, and what to
open first). Subcommands work on the session store, the exchange formats, model
discovery and the config file, all without the UI. May import the runtime, the
controller and everything below them; nothing in the core imports it.
"""

from sessions.cli.launch_options import LaunchOptions, RunApp
from sessions.cli.parser import build_parser
from sessions.cli.runner import apply_flags, main

__all__ = ["LaunchOptions", "RunApp", "apply_flags", "build_parser", "main"]
