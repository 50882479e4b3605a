"""``llamachat pull user/repo[:quant]``: fetch a model by name, as ``llama-cli -hf`` does.

The file goes to the Hugging Face cache (where the model list finds it); its path is
printed on stdout, the progress on stderr. SIGTERM and SIGHUP stop it as Ctrl+C does:
the partial file is deleted and one line says so.
"""

from __future__ import annotations

import argparse

from sessions.api.models import fetch_model
from sessions.cli.context import CommandContext
from sessions.cli.download_line import DownloadLine
from sessions.cli.interrupts import signals_raise


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "pull", help="download a GGUF model from the Hugging Face Hub by name",
        description="Download a GGUF model by name into the Hugging Face cache, as llama.cpp's -hf: "
                    "the file of the :quant given, else Q4_K_M, else Q8_0, else the first GGUF file; "
                    "every part of a split model. HF_TOKEN and HF_ENDPOINT are honoured.")
    parser.add_argument("name", metavar="USER/REPO[:QUANT]", help="e.g. ggml-org/gemma-3-270m-it-GGUF:Q8_0")
    return parser


def run(args: argparse.Namespace, ctx: CommandContext) -> int:
    with signals_raise():
        path = fetch_model(args.name, DownloadLine(ctx.err))
    ctx.print(path)
    return 0
