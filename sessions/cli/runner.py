"""``run``: parse, load the config, and run one command, every known failure told in
one line on stderr (``sessions.cli.reporting``).

With no subcommand, ``run`` returns the ``LaunchOptions`` the app starts with and the
entry point (``tui.entry``) starts it: this package never imports the UI, nor is
handed a way to start it.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from sessions import paths
from sessions.api.models import check_before_load, fetch_model
from sessions.api.settings import Config, ModelSettings, load_config
from sessions.cli.context import CommandContext, tell
from sessions.cli.download_line import DownloadLine
from sessions.cli.errors import CliError
from sessions.cli.interrupts import signals_raise
from sessions.cli.launch_options import LaunchOptions
from sessions.cli.parser import PROG, build_parser
from sessions.cli.reporting import error_line, reported
from sessions.text_safety import inert


def apply_flags(config: Config, args: argparse.Namespace, *, batch_wanted: int | None = None) -> Config:
    """The config with the global flags given on the command line applied.

    A relative ``-m`` is made absolute here: the path is stored with the session, and
    must still name the file when the session is reopened from another directory.

    ``-c`` replaces the file's context as if the file had said it: the batch starts again
    from ``batch_wanted`` (what the file set, else the default) instead of keeping what
    the file's smaller context brought it down to, and a ``-c`` smaller than the batch
    brings it down with it. Without ``batch_wanted`` the config's batch is kept.
    """
    model = getattr(args, "model", None)
    template = getattr(args, "chat_template_file", None)
    variables = getattr(args, "chat_template_kwargs", None)
    no_checkpoints = getattr(args, "no_checkpoints", False)
    applied = config.with_overrides(
        model=str(Path(model).expanduser().absolute()) if model else None,
        chat_template_file=str(Path(template).expanduser().absolute()) if template else None,
        n_ctx=getattr(args, "ctx_size", None),
        n_gpu_layers=getattr(args, "n_gpu_layers", None),
        threads=getattr(args, "threads", None),
        cache_type_k=getattr(args, "cache_type_k", None),
        cache_type_v=getattr(args, "cache_type_v", None),
        rpc=getattr(args, "rpc", None),
        tensor_split=getattr(args, "tensor_split", None),
        seed=getattr(args, "seed", None),
        theme=getattr(args, "theme", None),
        chat_template_kwargs=variables,
        models=None if variables is None else _flag_over_tables(config, variables),
        checkpoints=replace(config.checkpoints, enabled=False) if no_checkpoints else None,
    )
    if getattr(args, "ctx_size", None) is not None and batch_wanted is not None:
        applied = applied.with_(n_batch=batch_wanted)
    if applied.n_ctx and applied.n_batch > applied.n_ctx:
        applied = applied.with_(n_batch=applied.n_ctx)
    return applied


CONTEXT_BLOCK = 256
"""llama.cpp rounds every context up to a multiple of this many tokens (``llama_context``)."""


def context_note(n_ctx: int) -> str | None:
    """What to say when llama.cpp will not make the context asked for (None: it will)."""
    rounded = -(-n_ctx // CONTEXT_BLOCK) * CONTEXT_BLOCK
    if n_ctx <= 0 or rounded == n_ctx:
        return None
    return (f"a context of {n_ctx:,} tokens will hold {rounded:,}: llama.cpp makes contexts "
            f"in blocks of {CONTEXT_BLOCK} tokens")


def _flag_over_tables(config: Config, variables: dict[str, object]) -> dict[str, ModelSettings]:
    """The ``[models."NAME"]`` tables without the template variables
    ``--chat-template-kwargs`` sets. The flag replaces the top-level table, which a
    table's own values win over; given for this run, it must win over the config file
    everywhere, as ``--chat-template-file`` wins over every table's template."""
    return {name: replace(settings, chat_template_kwargs={
        key: value for key, value in settings.chat_template_kwargs.items() if key not in variables})
        for name, settings in config.models.items()}


def _check_model(args: argparse.Namespace) -> None:
    """Fail before the app starts when ``-m`` names a file that cannot be a model."""
    if not getattr(args, "model", None):
        return

    check_before_load(args.model)  # what would make llama.cpp abort the app, too


def _fetch_by_name(args: argparse.Namespace, err: TextIO) -> None:
    """``-hf user/repo[:quant]``: download the model (progress on stderr), then go on as if
    ``-m`` had named the file, whatever the command."""
    name = getattr(args, "hf_repo", None)
    if not name:
        return
    if getattr(args, "model", None):
        raise CliError("-m and -hf both name a model; give one of them")
    with signals_raise():  # SIGTERM and SIGHUP delete the partial file as Ctrl+C does
        args.model = str(fetch_model(name, DownloadLine(err)))


def run(argv: list[str] | None = None) -> int | LaunchOptions:
    """Run ``llamachat`` with ``argv`` (default: ``sys.argv[1:]``): a subcommand's exit
    status, or, when no subcommand is given, what the app should start with (the entry
    point, ``tui.entry``, runs it)."""
    return _run(argv, app=True)


def main(argv: list[str] | None = None) -> int:
    """``python -m sessions.cli``: the subcommands alone; returns the exit status."""
    done = _run(argv, app=False)
    assert isinstance(done, int)  # without the app, no launch options come back
    return done


def _run(argv: list[str] | None, *, app: bool) -> int | LaunchOptions:
    out, err = sys.stdout, sys.stderr
    try:
        args = build_parser().parse_args(argv)
    except CliError as error:
        return error_line(err, f"{error} (see `{PROG} --help`)")
    except SystemExit as done:  # --help and --version
        return done.code if isinstance(done.code, int) else 0

    loaded = load_config()
    for problem in loaded.problems:
        tell(err, f"{PROG}: warning: {loaded.path}: {inert(str(problem))}")
    config_path = loaded.path or paths.config_file()
    ctx = CommandContext(config=loaded.config, config_path=config_path, out=out, err=err)

    def command() -> int | LaunchOptions:
        _fetch_by_name(args, err)
        ctx.config = apply_flags(loaded.config, args, batch_wanted=loaded.batch_wanted or Config().n_batch)
        if args.command is None:
            if not app:
                raise CliError(f"no command given (the chat app starts from `{PROG}` itself); "
                               f"see `{PROG} --help`")
            _check_model(args)
            problems = tuple(f"{loaded.path or config_path}: {problem}" for problem in loaded.problems)
            rounded = context_note(ctx.config.n_ctx)
            problems += (rounded,) if rounded else ()
            return LaunchOptions.from_args(args, ctx.config, config_path, problems)
        rounded = context_note(ctx.config.n_ctx) if args.command in ("ask", "serve") else None
        if rounded:  # only ask and serve make a context; the other commands never load a model
            tell(err, f"{PROG}: note: {rounded}")
        status: int = args.run(args, ctx)
        if out is not None:  # None when started with stdout closed (``>&-``)
            out.flush()
        return status

    try:
        return reported(command, err, args.command)
    finally:
        ctx.close()
