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


def rpc_servers(text: str) -> list[str]:
    """``--rpc HOST:PORT[,HOST:PORT...]``; an empty text means none (overrides the config)."""
    from sessions.rpc.endpoints import EndpointError, parse_endpoints

    try:
        return list(parse_endpoints(text))
    except EndpointError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


rpc_servers.__name__ = "RPC servers"


def proportions(text: str) -> list[float]:
    """``-ts 3,1``: one non-negative number per device."""
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"tensor split must be numbers separated by commas, not {text!r}") from None
    if any(value < 0 for value in values):
        raise argparse.ArgumentTypeError(f"tensor split must not hold negative numbers, not {text!r}")
    return values


proportions.__name__ = "tensor split"
