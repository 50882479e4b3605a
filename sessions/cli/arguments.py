"""Argument types with plain-words errors, shared by the parser and the subcommands."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def whole_number(minimum: int | None = None, what: str = "value") -> Callable[[str], int]:
    """An argparse ``type`` for integers: ``-c abc`` says "context size must be a whole number"."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            message = f"{what} must be a whole number, not {text!r}"
            raise argparse.ArgumentTypeError(message) from None
        if minimum is not None and value < minimum:
            raise argparse.ArgumentTypeError(f"{what} must be at least {minimum}, not {value}")
        return value

    parse.__name__ = what
    return parse


session_id = whole_number(1, "session id")
