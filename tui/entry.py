"""``main``: the ``llamachat`` console script.

``sessions.cli.run`` parses the flags and runs a subcommand; given none, it returns the
``LaunchOptions`` the app starts with, and the app runs here inside
``sessions.api.runtime.open_runtime`` (the same store, checkpoints and controller
``llamachat ask`` uses), which closes everything once the app has stopped. A failure of
the app's start is one line on stderr, as a subcommand's is (``sessions.cli.reported``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from sessions import cli
from sessions.cli import LaunchOptions

if TYPE_CHECKING:
    from tui.startup import StartupRequest


def main(argv: list[str] | None = None) -> int:
    """Run ``llamachat`` with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    launch = cli.run(argv)
    if isinstance(launch, int):
        return launch
    return cli.reported(lambda: run_app(launch), sys.stderr, None)


def run_app(options: LaunchOptions) -> int:
    """Start the app with what the command line parsed; its exit status."""
    # Deferred: Textual and the engine load only when the app runs, not for a subcommand.
    from sessions.api.runtime import open_runtime
    from tui.app import STOP_SIGNALS, LlamaChatApp

    with open_runtime(options.config) as runtime:  # closing waits for a stopped reply to be stored
        app = LlamaChatApp(runtime.controller, config=options.config, startup=startup_request(options),
                           notices=[*options.config_problems, *runtime.notices], stop_signals=STOP_SIGNALS)
        app.run()
        return app.return_code or 0


def startup_request(options: LaunchOptions) -> StartupRequest:
    """The flags of ``options`` that decide the app's first screen (``tui.startup``)."""
    from tui.startup import StartupRequest  # deferred with the rest of the app

    return StartupRequest(demo=options.demo, model_path=options.model_path, session_id=options.session_id)
