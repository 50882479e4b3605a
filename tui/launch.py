"""The ``llamachat`` console entry point: the command line first, the app when asked.

``sessions.cli`` parses the flags and runs subcommands without importing Textual; when
no subcommand is given it calls ``run_app`` here with a ``LaunchOptions``. The app runs
inside ``sessions.runtime.open_runtime`` (the same store, checkpoints and controller
``llamachat ask`` uses), which closes everything once the app has stopped.
"""

from __future__ import annotations

from sessions import cli
from sessions.cli.launch_options import LaunchOptions
from tui.startup import StartupRequest


def main(argv: list[str] | None = None) -> int:
    return cli.main(argv, run_app=run_app)


def run_app(options: LaunchOptions) -> int:
    # Deferred: Textual and the engine load only when the app runs, not for a subcommand.
    from sessions.runtime import open_runtime
    from tui.app import STOP_SIGNALS, LlamaChatApp

    with open_runtime(options.config) as runtime:  # closing waits for a stopped reply to be stored
        app = LlamaChatApp(runtime.controller, config=options.config, startup=StartupRequest.from_options(options),
                           notices=[*options.config_problems, *runtime.notices], stop_signals=STOP_SIGNALS)
        app.run()
        return app.return_code or 0
