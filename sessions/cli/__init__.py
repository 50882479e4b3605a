"""The ``llamachat`` command line: global flags, subcommands, and the door to the app.

The entry point (``tui.entry``) calls ``run(argv)``; without a subcommand it
returns a ``LaunchOptions`` (the config with the flags applied, and what to open first)
and the entry point starts the app with it: the command line and the app are siblings
over the controller, and neither calls the other. ``main`` is ``python -m sessions.cli``.
Subcommands work on the session store, the exchange formats, model discovery and the
config file, all without the UI. May import the runtime, the
controller and everything below them; nothing in the core imports it.
"""

from sessions.cli.launch_options import LaunchOptions
from sessions.cli.parser import build_parser
from sessions.cli.reporting import reported
from sessions.cli.runner import apply_flags, main, run

__all__ = ["LaunchOptions", "apply_flags", "build_parser", "main", "reported", "run"]
