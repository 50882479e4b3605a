"""The subcommand registry: one small module per command.

A command module has ``add_parser(subparsers) -> ArgumentParser`` (it registers its name,
help and arguments) and ``run(args, ctx) -> int`` (the exit status). To add a command,
write such a module and list it in ``COMMANDS``; the parser adds the global flags and
routes ``args.run`` to it. Modules keep heavy imports inside ``run``.
"""

from __future__ import annotations

from types import ModuleType

from sessions.cli.commands import (
    ask,
    cache,
    config_cmd,
    delete,
    export,
    import_cmd,
    list_sessions,
    models,
    pull,
    rename,
    rpc_server,
    serve,
    show,
)

COMMANDS: list[ModuleType] = [
    ask,
    serve,
    list_sessions,
    show,
    export,
    import_cmd,
    rename,
    delete,
    models,
    pull,
    cache,
    config_cmd,
    rpc_server,
]
