"""``llamachat config``: the config file and where it is, or a commented one to start from."""

from __future__ import annotations

import argparse

from sessions.api.settings import MAX_CONFIG_BYTES, config_template, write_config_text
from sessions.bounded_read import read_regular_file
from sessions.cli.context import CommandContext
from sessions.cli.errors import CliError


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("config", help="show the config file, its path, or create one",
                                   description="Print the config file's path and what it says; with "
                                               "--path only its path; with --init write a commented "
                                               "config file with every default.")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--path", action="store_true", help="print the config file's path")
    action.add_argument("--init", action="store_true",
                        help="write a commented config.toml (never overwrites an existing one)")
    return parser


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    path = ctx.config_path
    if args.path:
        ctx.print(path)
        return 0
    if not args.init:
        show(ctx)
        return 0

    if path.exists():
        raise CliError(f"{path} already exists; not overwriting it")
    write_config_text(path, config_template())
    ctx.print(f"wrote {path}")
    return 0


def show(ctx: CommandContext) -> None:
    """The path, then the file as written (the settings it leaves out have their defaults)."""
    path = ctx.config_path
    if not path.exists():
        ctx.print(f"There is no config file at {path}: every setting has its default. "
                  "`llamachat config --init` writes a commented one to edit.")
        return
    try:
        text = read_regular_file(path, MAX_CONFIG_BYTES).decode("utf-8")  # a FIFO there must not block
    except (OSError, UnicodeDecodeError) as error:
        why = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise CliError(f"could not read the config file {path}: {why}") from error
    ctx.print(f"# {path} (settings not written here have their defaults)")
    ctx.print(text.rstrip("\n"))
