"""Models fetched by name from the Hugging Face Hub, as ``llama-cli -hf user/repo[:quant]``.

``parse_spec`` reads the name, ``model_files`` picks the files as llama.cpp does,
``fetch_model`` downloads them into the Hugging Face cache (the Hub asked through
huggingface_hub, imported only when a model is fetched or searched; every name in its
answer checked, and the cache written here: ``download``, ``names``, ``cache_layout``,
``transfer``) and ``search_models`` searches the Hub for GGUF repositories. May import
the core's small modules and ``sessions.discovery`` (the cache folder); never the engine
or llama.cpp.
"""

from __future__ import annotations

from sessions.hub.choice import HubSpec, best_model, model_files, parse_spec, quant_tags, split_info
from sessions.hub.client import cache_folder, cached_files, endpoint, fetch_model, repo_files, search_models
from sessions.hub.errors import DownloadStopped, HubError
from sessions.hub.progress import DownloadProgress, ProgressCallback, progress_text
from sessions.hub.recent import RecentDownload, recent_downloads, remember_download
from sessions.hub.search import HubModel

__all__ = [
    "DownloadProgress",
    "DownloadStopped",
    "HubError",
    "HubModel",
    "HubSpec",
    "ProgressCallback",
    "RecentDownload",
    "best_model",
    "cache_folder",
    "cached_files",
    "endpoint",
    "fetch_model",
    "model_files",
    "parse_spec",
    "progress_text",
    "quant_tags",
    "recent_downloads",
    "remember_download",
    "repo_files",
    "search_models",
    "split_info",
]
