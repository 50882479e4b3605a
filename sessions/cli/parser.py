"""The argument parser: llama.cpp-style global flags, then one subcommand per module.

Global flags (``-m``, ``-c``, ``-ngl``...) are accepted before or after a subcommand, so
``llamachat -m x.gguf ask ...`` and ``llamachat ask -m x.gguf ...`` mean the same. The
parser never exits on a bad flag: it raises ``UsageError``, which ``main`` reports on one
line with exit status 1 (argparse's own convention is 2).
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from sessions import __version__
from sessions.api.models import local_devices_line
from sessions.cli import commands
from sessions.cli.arguments import (
    cache_type,
    context_size,
    gpu_layers,
    proportions,
    rpc_servers,
    seed,
    session_id,
    template_kwargs,
    threads,
)
from sessions.cli.errors import UsageError

PROG = "llamachat"


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that raises instead of printing usage and exiting with 2."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)

    def format_help(self) -> str:
        """The help, and for ``llamachat --help`` this machine's devices (looked up only now)."""
        text = super().format_help()
        if self.prog == PROG:
            text += "\n" + local_devices_line() + "\n"
        return text


def add_global_flags(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """The flags every command accepts; ``defaults`` is False on subcommand parsers so a
    flag given before the subcommand is not reset by the subcommand's own default."""

    def default(value: Any) -> Any:
        return value if defaults else argparse.SUPPRESS

    group = parser.add_argument_group("model and app options (before or after the command)")
    group.add_argument("-m", "--model", metavar="PATH", default=default(None),
                       help="GGUF model to load (overrides `model` in config.toml)")
    group.add_argument("-hf", "--hf-repo", metavar="USER/REPO[:QUANT]", default=default(None),
                       help="fetch this model from the Hugging Face Hub (Q4_K_M unless :QUANT is "
                            "given) into its cache, then load it as -m would")
    group.add_argument("-c", "--ctx-size", metavar="N", type=context_size,
                       default=default(None), help="context size in tokens (0: the model's own)")
    group.add_argument("-ngl", "--n-gpu-layers", metavar="N", type=gpu_layers,
                       default=default(None),
                       help='layers to offload to the GPUs: a number, "all", or "auto" (default: '
                            "those that fit)")
    group.add_argument("-t", "--threads", metavar="N", type=threads,
                       default=default(None), help="CPU threads for generation")
    group.add_argument("-ctk", "--cache-type-k", metavar="TYPE", type=cache_type, default=default(None),
                       help="type of the K cache: f16 (default), q8_0, q4_0... (less memory per token)")
    group.add_argument("-ctv", "--cache-type-v", metavar="TYPE", type=cache_type, default=default(None),
                       help="type of the V cache, likewise")
    group.add_argument("--rpc", metavar="HOST:PORT[,...]", type=rpc_servers, default=default(None),
                       help="RPC servers (`llamachat rpc-server` on other machines) that take the "
                            "offloaded layers (-ngl); trusted networks only")
    group.add_argument("-ts", "--tensor-split", metavar="N0,N1,...", type=proportions, default=default(None),
                       help="share of the offloaded layers per device, RPC servers first")
    group.add_argument("--seed", metavar="N", type=seed, default=default(None),
                       help="seed for sampling replies (-1: a new one for every reply)")
    group.add_argument("--demo", action="store_true", default=default(False),
                       help="start with the built-in demo model (no download needed)")
    group.add_argument("--session", metavar="ID", type=session_id, default=default(None),
                       help="open this session at start (for `ask` and `cache`: the session they work on)")
    group.add_argument("--theme", metavar="NAME", default=default(None), help="colour theme")
    group.add_argument("--chat-template-file", metavar="FILE", default=default(None),
                       help="Jinja chat template used instead of the model's own (sandboxed as well)")
    group.add_argument("--chat-template-kwargs", metavar="JSON", type=template_kwargs, default=default(None),
                       help='variables for the chat template, e.g. \'{"enable_thinking": false}\'')
    group.add_argument("--no-checkpoints", action="store_true", default=default(False),
                       help="keep no model-state checkpoints (every switch re-reads the prompt)")


def build_parser() -> argparse.ArgumentParser:
    """The full parser: global flags, ``--version``, and every registered subcommand."""
    parser = Parser(
        prog=PROG,
        description="Branching chats with local GGUF models. Without a command, starts the app.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    add_global_flags(parser, defaults=True)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for command in commands.COMMANDS:
        sub = command.add_parser(subparsers)
        add_global_flags(sub, defaults=False)
        sub.set_defaults(run=command.run)
    return parser
