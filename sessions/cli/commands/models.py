"""``llamachat models``: every GGUF model found, with its memory (in words) and size, and the devices.

After the table, on stderr (not with ``--json``): the size of the checkpoint files against
their budget, this machine's devices, each RPC server's (asked now, so a wrong address
shows before a model loads) and where ``-ngl`` puts layers.
"""

from __future__ import annotations

import argparse

from sessions.api.models import discover_models, local_devices_line, offload_line, search_roots, server_lines
from sessions.cli.context import CommandContext
from sessions.cli.formatting import table
from sessions.units import human_count, human_size


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "models", help="list GGUF models found on this machine",
        description="List GGUF models in the configured model_dirs, the Hugging Face cache, "
                    "LM Studio's folders and llama.cpp's cache (headers only; nothing is loaded).")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead")
    parser.add_argument("--all", action="store_true",
                        help="also list adapters, vision projectors and vocabulary-only files")
    return parser


DEMO_NOTE = ("the demo model is there all the same: `llamachat --demo` makes it (random weights, its replies "
             "are random text), and the model picker (F5) lists it first")


def card_dict(card) -> dict:
    return {
        "path": str(card.path), "name": card.name, "architecture": card.architecture,
        "parameter_count": card.parameter_count, "file_size": card.file_size,
        "quantization": card.quantization, "context_length": card.context_length,
        "memory_kind": card.memory_kind.value if card.memory_kind else None,
        "memory": card.memory_label,
        "sliding_window": card.sliding_window, "has_chat_template": card.has_chat_template,
        "type": card.model_type, "split_count": card.split_count,
        "missing_parts": list(card.missing_parts), "source": card.source, "error": card.error,
        "checkpoint_problem": card.checkpoint_problem,
    }


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    # Deferred: the checkpoint store loads numpy, which the CLI does not load to start.
    from sessions.cli.cache_usage import usage_line

    cards = discover_models(ctx.config, include_auxiliary=args.all)
    if args.json:
        ctx.print_json([card_dict(card) for card in cards])
        return 0
    if not cards:
        searched = ", ".join(str(root.path) for root in search_roots(ctx.config.model_dirs))
        ctx.note(f"no models found; searched {searched} (add folders to model_dirs in config.toml)")
        ctx.note(DEMO_NOTE)
        ctx.note(usage_line(ctx))
        _print_devices(ctx)
        return 0
    rows = [["NAME", "ARCH", "PARAMS", "QUANT", "SIZE", "CONTEXT", "MEMORY", "PATH"]]
    for card in cards:
        if card.error:
            rows.append([card.name, "-", "-", "-", human_size(card.file_size), "-", "-",
                         f"{card.path}  (unusable: {card.error})"])
            continue
        parts = f" ({card.split_count} parts)" if card.is_split else ""
        rows.append([
            card.name, card.architecture or "?", human_count(card.parameter_count),
            card.quantization or "?", human_size(card.file_size),
            str(card.context_length or "?"),
            _memory(card), f"{card.path}{parts}",
        ])
    for line in table(rows):
        ctx.print(line)
    for card in cards:
        if card.checkpoint_problem:
            ctx.note(f"{card.name} ran without checkpoints when it was last loaded: {card.checkpoint_problem}")
    ctx.note(usage_line(ctx))
    _print_devices(ctx)
    return 0


def _memory(card) -> str:
    label = card.memory_label or "?"
    return f"{label}, no checkpoints" if card.checkpoint_problem else label


def _print_devices(ctx: CommandContext) -> None:
    """This machine's devices, each RPC server's (asked now), and where -ngl puts layers.

    On stderr, like the other remarks: stdout stays the table a script reads.
    """
    ctx.note(local_devices_line())
    for line in server_lines(ctx.config.rpc):
        ctx.note(line)
    ctx.note(offload_line(ctx.config.rpc, ctx.config.n_gpu_layers))
