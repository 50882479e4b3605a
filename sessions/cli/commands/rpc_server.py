"""``llamachat rpc-server``: lend this machine's devices to llamachat on another machine.

The server is llama.cpp's own (``ggml_backend_rpc_start_server``) from the same build, so
a second machine needs llamachat installed and nothing else. It binds to 127.0.0.1
unless ``--host`` says otherwise; the protocol has no authentication.
"""

from __future__ import annotations

import argparse
import ipaddress

from sessions import paths
from sessions.api.models import RpcError, default_threads, serve_rpc
from sessions.cli.arguments import whole_number
from sessions.cli.context import CommandContext
from sessions.cli.errors import CliError

DEFAULT_PORT = 50052


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "rpc-server", help="serve this machine's devices to llamachat elsewhere (llama.cpp RPC)",
        description="Run a llama.cpp RPC server on this machine's GPUs (or its CPU when it has none), "
                    "for `llamachat --rpc HOST:PORT` on another machine. -t sets the CPU threads. "
                    "The protocol has no authentication: use it on trusted networks only.")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only; "
                             "0.0.0.0 for every network, trusted networks only)")
    parser.add_argument("--port", type=whole_number(1, "port"), default=DEFAULT_PORT,
                        help=f"TCP port (default {DEFAULT_PORT})")
    parser.add_argument("--cache", action="store_true",
                        help="keep received weights in a local cache, so the next load of the same "
                             "model sends hashes instead of the tensors")
    return parser


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    if args.port > 65535:
        raise CliError(f"the port must be a number from 1 to 65535, not {args.port}")
    try:  # ggml's server takes a numeric IPv4 address only (inet_addr)
        host = str(ipaddress.IPv4Address(args.host.strip()))
    except ValueError:
        raise CliError(f"--host must be an IPv4 address such as 127.0.0.1 or 0.0.0.0, not {args.host!r}") from None
    cache_dir = None
    if args.cache:
        cache_dir = str(paths.ensure_private_dir(paths.cache_dir() / "rpc"))
    threads = ctx.config.threads or default_threads()
    try:
        return serve_rpc(host, args.port, threads, cache_dir, ctx.out, ctx.err)
    except RpcError as error:
        raise CliError(str(error)) from None
