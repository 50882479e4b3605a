"""``HOST:PORT`` lists as llama.cpp's ``--rpc`` takes them, checked before anything connects.

llama.cpp splits an endpoint at its first colon and aborts the process on anything it
cannot parse, so the same rule is applied here first, with a sentence for each mistake.
"""

from __future__ import annotations

from collections.abc import Iterable

from sessions.errors import LlamachatError
from sessions.rpc.errors import RpcError

MAX_SERVERS = 16
"""``GGML_RPC_MAX_SERVERS`` in ``ggml-rpc.h``."""


class EndpointError(LlamachatError, ValueError):
    """An endpoint or list of endpoints is malformed; the message names it."""


def parse_endpoint(text: str) -> str:
    """``text`` as a canonical ``host:port`` (surrounding spaces removed), or EndpointError."""
    item = text.strip()
    if item.count(":") > 1:
        raise EndpointError(f"{item!r} is not HOST:PORT (llama.cpp's RPC takes no IPv6 address)")
    host, sep, port = item.partition(":")
    if not sep or not host or any(c.isspace() for c in host):
        raise EndpointError(f"{item!r} is not HOST:PORT")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise EndpointError(f"{item!r}: the port must be a number from 1 to 65535")
    return f"{host}:{int(port)}"


def parse_endpoints(items: str | Iterable[str]) -> tuple[str, ...]:
    """A comma-separated text or a list of endpoints, each checked, duplicates refused."""
    parts = items.split(",") if isinstance(items, str) else list(items)
    parts = [part for part in parts if part.strip()] if isinstance(items, str) else parts
    endpoints = tuple(parse_endpoint(part) for part in parts)
    seen: set[str] = set()
    for endpoint in endpoints:
        if endpoint in seen:
            raise EndpointError(f"{endpoint} is listed twice")
        seen.add(endpoint)
    if len(endpoints) > MAX_SERVERS:
        raise EndpointError(f"at most {MAX_SERVERS} RPC servers can be used, not {len(endpoints)}")
    return endpoints


def split_endpoint(endpoint: str) -> tuple[str, int]:
    host, _, port = endpoint.partition(":")
    return host, int(port)


def check_offload(rpc: Iterable[str], n_gpu_layers: int | str) -> None:
    """RPC servers hold only offloaded layers: with ``-ngl 0`` they would get none."""
    if tuple(rpc) and n_gpu_layers == 0:
        raise RpcError("with -ngl 0 no layer goes to the RPC servers: pass -ngl all to offload every layer, "
                       "or a number of layers (set n_gpu_layers in config.toml to keep it)")
