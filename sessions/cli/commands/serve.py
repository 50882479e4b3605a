"""``llamachat serve``: the branch engine behind an OpenAI-compatible HTTP endpoint.

Loads one model, as ``ask`` does (``-m``, ``-hf``, ``--demo``, or ``model`` of the
config; the llama.cpp-style flags apply), and answers ``/v1/chat/completions``,
``/v1/completions``, ``/v1/models`` and ``/health`` until a signal stops it
(``sessions.serve``). It listens on 127.0.0.1 unless ``--host`` says otherwise. The
sampling flags give requests their defaults, for the fields a request leaves out.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
from pathlib import Path
from typing import Any

from sessions.cli.arguments import whole_number
from sessions.cli.ask_input import add_sampling_flags, sampling_overrides
from sessions.cli.context import CommandContext
from sessions.cli.errors import CliError, UsageError
from sessions.cli.interrupts import signals_raise

DEFAULT_PORT = 8080
KEY_VARIABLE = "LLAMACHAT_API_KEY"
"""An API key given by the environment, which other users of the machine cannot read as
they can read a process's arguments."""


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "serve", help="answer OpenAI-compatible HTTP requests with a model (the chats are kept as served chats)",
        description="Serve a model over an OpenAI-compatible HTTP API (/v1/chat/completions, /v1/completions, "
                    "/v1/models, /health). Each conversation a client sends is kept as a served chat: its "
                    "swipes, edits and continues evaluate only their new tokens, across restarts too "
                    "(see docs/serve.md).")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=whole_number(0, "port", 65535), default=DEFAULT_PORT,
                        help=f"TCP port (default {DEFAULT_PORT}; 0: a free one, named on stderr)")
    parser.add_argument("--api-key", dest="api_keys", action="append", default=[], metavar="KEY",
                        help="require `Authorization: Bearer KEY` (repeatable; also the environment variable "
                             f"{KEY_VARIABLE})")
    parser.add_argument("--alias", metavar="NAME", help="the model's name in /v1/models (default: its file's name)")
    parser.add_argument("--queue", type=whole_number(1, "queue", 10_000), default=16, metavar="N",
                        help="requests that may wait behind the one being answered (default 16; more: 503)")
    parser.add_argument("--max-body", type=whole_number(1024, "body size", 1 << 30), default=8 << 20,
                        metavar="BYTES", help="largest request body (default 8 MiB)")
    parser.add_argument("--timeout", type=whole_number(1, "timeout", 86_400), default=600, metavar="SECONDS",
                        help="how long a request may wait for the model behind others (default 600)")
    parser.add_argument("--keep-chats", type=whole_number(0, "served chats kept"), default=1000, metavar="N",
                        help="served chats kept, the least recently used deleted first (default 1000; 0: no limit)")
    parser.add_argument("--keep-days", type=whole_number(0, "days"), default=30, metavar="DAYS",
                        help="days a served chat is kept unused (default 30; 0: no limit)")
    parser.add_argument("--access-log", action="store_true", help="log every request on stderr")
    add_sampling_flags(parser)
    return parser


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    try:  # deferred: the HTTP stack, numpy and the engine, which the other commands do not load
        from sessions.serve import ServeOptions, serve
    except ModuleNotFoundError as missing:
        raise CliError(f"llamachat serve needs {missing.name}, which the serve extra installs: "
                       "pip install 'llamachat[serve]'") from None

    keys = [*args.api_keys, *([os.environ[KEY_VARIABLE]] if os.environ.get(KEY_VARIABLE) else [])]
    if any(not key.strip() or any(ch.isspace() for ch in key) for key in keys):
        raise UsageError("an API key must be a word without spaces")
    if not keys and not _loopback(args.host):
        ctx.note(f"warning: listening on {args.host} without --api-key: anyone who can reach it can use the model "
                 "and read the chats it keeps")
    model = _model(args, ctx)
    options = ServeOptions(host=args.host, port=args.port, api_keys=tuple(keys), alias=args.alias, queue=args.queue,
                           max_body=args.max_body, queue_seconds=float(args.timeout),
                           keep_chats=args.keep_chats or None, keep_days=float(args.keep_days) or None,
                           access_log=args.access_log)
    sampling = ctx.config.effective_sampling().with_(**sampling_overrides(args))
    with signals_raise():  # a stop while the model loads unwinds, and closes what was opened
        return serve(ctx.config, options, model, sampling, ctx.note)


def _model(args: argparse.Namespace, ctx: CommandContext) -> Path | None:
    """The model file (None: the demo model, made by the runtime)."""
    if getattr(args, "demo", False):
        return None
    if ctx.config.model:
        return Path(ctx.config.model)
    raise CliError("no model: pass -m PATH, -hf USER/REPO or --demo (or set `model` in config.toml)")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
