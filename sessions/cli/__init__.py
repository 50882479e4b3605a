"""The ``llamachat`` command line: global flags, subcommands, and the door to the app.

``tui.launch.main`` calls ``main(argv, run_app=...)``; without a subcommand ``main``
hands the parsed flags and the config to ``run_app``. Subcommands work on the session
store, the exchange formats, model discovery and the config file, all without the UI.
"""

from sessions.cli.parser import build_parser
from sessions.cli.runner import apply_flags, main

__all__ = ["apply_flags", "build_parser", "main"]
