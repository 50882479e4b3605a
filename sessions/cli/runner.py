"""``main``: parse, load the config, run one command, and turn every known failure into
one line on stderr with exit status 1.

Users meet the command line in scripts and terminals, where a traceback is noise: each
of the project's error classes already carries a message written for them. The Textual
app is started through ``run_app`` (passed in by ``tui.launch``) so this package never
imports the UI.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from sessions import paths
from sessions.cli.context import CommandContext, tell
from sessions.cli.download_line import DownloadLine
from sessions.cli.errors import CliError
from sessions.cli.interrupts import silence_stdout
from sessions.cli.launch_options import LaunchOptions, RunApp
from sessions.cli.parser import PROG, build_parser
from sessions.config import Config, ConfigError, load_config
from sessions.config.model import ModelSettings
from sessions.discovery import check_before_load
from sessions.hub import fetch_model
from sessions.text_safety import inert


def _known_errors() -> tuple[type[BaseException], ...]:
    """The project's own error classes: their messages are meant for the user.

    Each is taken from its module only if that module is loaded already: an error can
    only have been raised by code that ran, and a command that never touched the store,
    the engine or a chat template does not import them here (nor fail to).
    """
    found: list[type[BaseException]] = [CliError, ConfigError]
    for module, name in _ERRORS_FOR_THE_USER:
        loaded = sys.modules.get(module)
        if loaded is not None:
            found.append(getattr(loaded, name))
    return tuple(found)


_ERRORS_FOR_THE_USER = (
    ("sessions.discovery.gguf_header", "ModelFileError"),  # a file that cannot be a model
    ("sessions.store.errors", "StoreError"),
    ("sessions.exchange.builder", "ExchangeError"),
    ("sessions.llama.context", "DecodeError"),  # "could not create a context of N tokens (out of memory?)"
    ("sessions.templates.chat_template", "TemplateError"),  # "the chat template rejected the conversation: ..."
    ("sessions.hub.errors", "HubError"),  # "no model named user/repo on https://huggingface.co ..."
)
"""(module, class) of the errors whose message is one sentence for the user."""


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
    args.model = str(fetch_model(name, DownloadLine(err)))


def _error(err: TextIO, message: str) -> int:
    tell(err, f"{PROG}: error: {inert(message)}")
    return 1


def _stopped(err: TextIO, signum: int, command: str | None) -> int:
    """One line saying what a signal cut short (after the ``^C`` a terminal echoes, on a
    line of its own); the status a shell reports for it, 128 + the signal."""
    isatty = getattr(err, "isatty", None)
    start = "\n" if isatty is not None and isatty() else ""
    doing = f"`{PROG} {command}`" if command else "the app's start"
    tell(err, f"{start}{PROG}: stopped by {signal.Signals(signum).name} before {doing} finished")
    return 128 + signum


def main(argv: list[str] | None = None, *, run_app: RunApp | None = None) -> int:
    """Run ``llamachat`` with ``argv`` (default: ``sys.argv[1:]``); returns the exit status."""
    out, err = sys.stdout, sys.stderr
    try:
        args = build_parser().parse_args(argv)
    except CliError as error:
        return _error(err, f"{error} (see `{PROG} --help`)")
    except SystemExit as done:  # --help and --version
        return done.code if isinstance(done.code, int) else 0

    loaded = load_config()
    for problem in loaded.problems:
        tell(err, f"{PROG}: warning: {loaded.path}: {inert(str(problem))}")
    config_path = loaded.path or paths.config_file()
    ctx = CommandContext(config=loaded.config, config_path=config_path, out=out, err=err)
    try:
        _fetch_by_name(args, err)
        ctx.config = apply_flags(loaded.config, args, batch_wanted=loaded.batch_wanted or Config().n_batch)
        if args.command is None:
            if run_app is None:
                raise CliError(f"no command given (the chat app starts from `{PROG}` itself); "
                               f"see `{PROG} --help`")
            _check_model(args)
            problems = tuple(f"{loaded.path or config_path}: {problem}" for problem in loaded.problems)
            rounded = context_note(ctx.config.n_ctx)
            problems += (rounded,) if rounded else ()
            return run_app(LaunchOptions.from_args(args, ctx.config, config_path, problems)) or 0
        rounded = context_note(ctx.config.n_ctx) if args.command == "ask" else None
        if rounded:  # only ask makes a context; the other commands never load a model
            tell(err, f"{PROG}: note: {rounded}")
        status = args.run(args, ctx)
        if out is not None:  # None when started with stdout closed (``>&-``)
            out.flush()
        return status
    except BrokenPipeError:  # `llamachat sessions | head`: the reader left early
        silence_stdout()
        return 0
    except KeyboardInterrupt as stop:  # Ctrl+C, or a StopSignal (``interrupts.signals_raise``)
        return _stopped(err, getattr(stop, "signum", signal.SIGINT), args.command)
    except Exception as error:
        if isinstance(error, _known_errors()):
            return _error(err, str(error))
        if isinstance(error, OSError):
            where = f"{error.filename}: " if error.filename else ""
            return _error(err, f"{where}{error.strerror or error}")
        if os.environ.get("LLAMACHAT_DEBUG"):  # a bug: still one line, unless asked
            raise
        return _error(err, f"unexpected {type(error).__name__}: {error} "
                           "(run with LLAMACHAT_DEBUG=1 to see where)")
    finally:
        ctx.close()
