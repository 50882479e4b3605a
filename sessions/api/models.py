"""Model files: found on disk and read from their headers, fetched by name from the
Hugging Face Hub, and the devices and RPC servers they run on."""

from __future__ import annotations

from sessions.discovery import ModelCard, ModelFileError, check_before_load, discover_models, search_roots
from sessions.hub import (
    DownloadProgress,
    DownloadStopped,
    HubError,
    HubModel,
    ProgressCallback,
    fetch_model,
    progress_text,
)
from sessions.rpc.errors import RpcError
from sessions.rpc.report import local_devices_line, offload_line, server_lines
from sessions.rpc.server import serve as serve_rpc

__all__ = [
    "DownloadProgress",
    "DownloadStopped",
    "HubError",
    "HubModel",
    "ModelCard",
    "ModelFileError",
    "ProgressCallback",
    "RpcError",
    "check_before_load",
    "default_threads",
    "discover_models",
    "fetch_model",
    "local_devices_line",
    "offload_line",
    "progress_text",
    "search_roots",
    "server_lines",
    "serve_rpc",
]


def default_threads() -> int:
    """Threads a model runs on when the config does not say (``sessions.llama.context``)."""
    # Deferred: the context's module loads numpy, which listing models does not need.
    from sessions.llama.context import default_threads as threads

    return threads()
