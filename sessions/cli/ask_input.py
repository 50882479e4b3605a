"""What ``llamachat ask`` is asked, and how: the message text, its files and the sampling flags.

The text comes from the arguments, or from standard input when it is ``-`` or when no
text is given and input is not a terminal (``echo hi | llamachat ask``, ``ask - <
question.txt``). Either way it must be UTF-8: Python keeps the undecodable bytes of an
argument as lone surrogates, which no file, database or model could take, so they are
refused here in one sentence instead of failing somewhere deeper.

The sampling flags apply on top of the chat's own settings: for a new chat they become
its settings (saved with it), for an existing one they apply to this reply only.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, BinaryIO

from sessions.api.settings import SamplingValueError, parse_sampling_value
from sessions.attachments import Attachment, AttachmentError, read_attachment
from sessions.cli.errors import CliError

SAMPLING_FLAGS: dict[str, tuple[str, str, str]] = {
    "temperature": ("--temp", "T", "sampling temperature (0: greedy)"),
    "top_k": ("--top-k", "N", "keep the N most likely tokens (0: all)"),
    "top_p": ("--top-p", "P", "keep the most likely tokens up to probability P (1: all)"),
    "min_p": ("--min-p", "P", "drop tokens less likely than P times the most likely one (0: none)"),
    "repeat_penalty": ("--repeat-penalty", "R", "penalise recently seen tokens (1: off)"),
    "max_tokens": ("--max-tokens", "N", "longest reply, in tokens"),
}
"""Setting name: (flag, metavar, help)."""


def add_sampling_flags(parser: argparse.ArgumentParser) -> None:
    for name, (flag, metavar, help_text) in SAMPLING_FLAGS.items():
        parser.add_argument(flag, dest=name, type=_typed(name), metavar=metavar, help=help_text)


def _typed(name: str):
    def parse(text: str) -> int | float:
        try:
            return parse_sampling_value(name, text)
        except SamplingValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    parse.__name__ = name
    return parse


def sampling_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling settings given on the command line (``--seed`` included)."""
    given = {name: getattr(args, name, None) for name in SAMPLING_FLAGS}
    seed = getattr(args, "seed", None)
    if seed is not None:
        given["seed"] = seed
    return {name: value for name, value in given.items() if value is not None}


def message_text(words: list[str], *, wanted: bool, stdin: BinaryIO | None = None) -> str:
    """The message: the arguments joined, or standard input (see the module docstring).

    ``wanted`` is False for the forms that take no text (``--regenerate``, ``--continue``):
    standard input is then left alone.
    """
    for word in words:
        _check_utf8(word, "the message")
    text = " ".join(words).strip()
    if text == "-" or (not text and wanted and _piped()):
        text = _read(stdin if stdin is not None else sys.stdin.buffer).strip()
    return text


def attached_files(paths: list[str]) -> list[Attachment]:
    """The files of ``--file``, read and checked (text, a regular file, not too large)."""
    try:
        return [read_attachment(path) for path in paths]
    except AttachmentError as error:
        raise CliError(str(error)) from None


def _piped() -> bool:
    stream = sys.stdin
    try:
        return stream is not None and not stream.isatty()
    except (OSError, ValueError):
        return False


def _read(stream: BinaryIO) -> str:
    data = stream.read()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise CliError(f"the message on standard input is not UTF-8 text (byte 0x{data[error.start]:02x} "
                       f"at offset {error.start:,}): convert it first, e.g. with iconv") from None


def _check_utf8(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = text[error.start]
        raw = f"0x{ord(bad) - 0xDC00:02x}" if 0xDC80 <= ord(bad) <= 0xDCFF else repr(bad)
        raise CliError(f"{what} is not UTF-8 text (byte {raw} at character {error.start + 1}): "
                       "set a UTF-8 locale or convert it first") from None
