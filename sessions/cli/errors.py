"""The command line's own errors: each becomes one ``llamachat: error: ...`` line, exit 1."""

from __future__ import annotations

from sessions.errors import LlamachatError


class CliError(LlamachatError):
    """A user error found by a subcommand (bad combination of flags, file exists...)."""


class UsageError(CliError):
    """A bad flag or argument, found by the parser (argparse would exit 2; we exit 1)."""
