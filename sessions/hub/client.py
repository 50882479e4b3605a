"""Fetching a model by name and searching the Hub, through ``huggingface_hub``.

huggingface_hub brings what a user of the Hub already has set up: its cache (shared
with every other tool that uses it, and searched by ``sessions.discovery``), the token
from ``HF_TOKEN`` or ``hf auth login``, and the ``HF_ENDPOINT`` mirror. The file itself
is written by ``sessions.hub.download``, which checks every name the Hub's answer gives
before anything is written (huggingface_hub's own download does not). A connection that
drops mid-file is resumed from the bytes already written (a ``Range`` request). The
endpoint and the cache folder are read from the environment on every call, not when
huggingface_hub was first imported, so a variable changed since still counts.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sessions.discovery.search_paths import huggingface_hub_dir
from sessions.hub.cache_layout import RepoCache
from sessions.hub.choice import HubSpec, model_files, parse_spec, quant_tags
from sessions.hub.download import FileDownload
from sessions.hub.errors import HubError
from sessions.hub.names import check_file_name
from sessions.hub.progress import ProgressCallback
from sessions.hub.recent import remember_download
from sessions.hub.search import HubModel

SEARCH_TIMEOUT = 10.0
"""Seconds a search waits for the Hub's answer."""


def _hub() -> Any:
    # Deferred: huggingface_hub and its HTTP client take a while to import, and only
    # fetching or searching needs them.
    import huggingface_hub

    return huggingface_hub


def endpoint() -> str | None:
    """The Hub's address when ``HF_ENDPOINT`` moves it (None: huggingface.co)."""
    return os.environ.get("HF_ENDPOINT", "").rstrip("/") or None


def cache_folder() -> Path:
    """Where downloads go: the Hugging Face hub cache (``HF_HUB_CACHE``, ``HF_HOME``)."""
    return huggingface_hub_dir()


def repo_files(repo: str) -> list[str]:
    """The files of ``repo`` on the Hub; those already in the cache when the Hub cannot
    be reached (as llama.cpp falls back to its cache); ``HubError`` when neither has any."""
    hub = _hub()
    try:
        # ``model_info`` asks once; ``list_repo_files`` retries a refused connection for
        # some 20 seconds before the cache could be tried.
        info = hub.HfApi(endpoint=endpoint()).model_info(repo)
        return [sibling.rfilename for sibling in info.siblings or ()]
    except Exception as error:
        cached = cached_files(repo)
        if cached and _unreachable(error):
            return cached
        raise _plain(error, repo) from error


def cached_files(repo: str) -> list[str]:
    """The files of ``repo``'s newest snapshot in the cache (``refs/main``), those that
    lead to a regular file inside the cache."""
    try:
        return RepoCache(cache_folder(), repo).cached_files()
    except OSError:
        return []


def fetch_model(spec: HubSpec | str, progress: ProgressCallback | None = None) -> Path:
    """Download the model ``spec`` names (every part of a split one) into the cache and
    return the file to open: its only or first part. Files already cached are checked
    against the Hub (one quick request each) and not fetched again."""
    if isinstance(spec, str):
        spec = parse_spec(spec)
    files = repo_files(spec.repo)
    try:
        wanted = model_files(files, spec.tag)
    except HubError as error:
        raise HubError(f"{spec.repo}: {error}") from None
    for name in wanted:
        check_file_name(name, spec.repo)
    hub = _hub()
    fetched: list[Path] = []
    for part, name in enumerate(wanted, start=1):
        download = FileDownload(hub, spec.repo, name, root=cache_folder(), endpoint=endpoint(),
                                progress=progress, part=part, parts=len(wanted))
        try:
            fetched.append(download.fetch(_unreachable))
        except Exception as error:
            raise _plain(error, spec.repo, name) from error
    tag = spec.tag.upper() or next(iter(quant_tags([wanted[0]])), "")
    remember_download(fetched[0], f"{spec.repo}:{tag}" if tag else spec.repo)
    return fetched[0]


def search_models(query: str, limit: int = 30) -> list[HubModel]:
    """GGUF repositories on the Hub whose name holds ``query``, the most downloaded first.

    One request through huggingface_hub's session (its headers and token), not
    ``HfApi.list_models``, whose pages are retried for some 20 seconds when the Hub
    cannot be reached: a search should say so at once.
    """
    hub = _hub()
    params = {"search": query.strip(), "filter": "gguf", "sort": "downloads", "limit": limit}
    try:
        response = hub.get_session().get(f"{endpoint() or hub.constants.ENDPOINT}/api/models", params=params,
                                         headers=hub.utils.build_hf_headers(), timeout=SEARCH_TIMEOUT)
        hub.utils.hf_raise_for_status(response)
        found = response.json()
        return [HubModel(str(entry["id"]), _count(entry.get("downloads")), _count(entry.get("likes")))
                for entry in found if isinstance(entry, dict) and entry.get("id")]
    except Exception as error:
        raise _plain(error, None, searching=True) from error


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def _unreachable(error: BaseException) -> bool:
    """The Hub could not be asked at all (offline, no network), as opposed to a refusal."""
    hub = _hub()
    if isinstance(error, hub.errors.OfflineModeIsEnabled):
        return True
    if isinstance(error, hub.errors.HfHubHTTPError) or type(error).__name__ == "TooManyRedirects":
        return False
    return isinstance(error, ConnectionError | TimeoutError) or type(error).__module__.startswith(("httpx", "httpcore"))


def _plain(error: BaseException, repo: str | None, file: str | None = None, *,
           searching: bool = False) -> BaseException:
    """``error`` from huggingface_hub as one sentence (a ``HubError``); an error of ours
    or of the disk passes through."""
    if isinstance(error, HubError):
        return error
    hub = _hub()
    errors = hub.errors
    where = endpoint() or "https://huggingface.co"
    if isinstance(error, errors.GatedRepoError):
        return HubError(f"{repo} is gated: accept its terms on the Hub's page, then log in "
                        "(`hf auth login` or HF_TOKEN)")
    if isinstance(error, errors.RepositoryNotFoundError):
        return HubError(f"no model named {repo} on {where} (check the name; a private repository "
                        "needs a login: `hf auth login` or HF_TOKEN)")
    if isinstance(error, errors.RevisionNotFoundError | errors.RemoteEntryNotFoundError):
        return HubError(f"{repo}: {file or 'the file'} is no longer on {where}")
    if isinstance(error, errors.HfHubHTTPError):
        status = getattr(getattr(error, "response", None), "status_code", None)
        return HubError(f"{where} refused {'the download of ' + file if file else 'the request'}"
                        f"{f' (HTTP {status})' if status else ''}: try again later")
    if type(error).__name__ == "TooManyRedirects":
        return HubError(f"{where} sent {'the request for ' + file if file else 'the request'} round a loop of "
                        "redirects: refused; check HF_ENDPOINT or try again later")
    if searching and (isinstance(error, errors.OfflineModeIsEnabled) or _unreachable(error)):
        return HubError(f"could not reach {where} to search it: check the network or HF_ENDPOINT")
    if isinstance(error, errors.LocalEntryNotFoundError | errors.OfflineModeIsEnabled) or _unreachable(error):
        return HubError(f"could not reach {where}{f' for {file}' if file else ''} and it is not in the cache "
                        f"({cache_folder()}): check the network or HF_ENDPOINT")
    if isinstance(error, OSError) and not type(error).__module__.startswith("huggingface_hub"):
        return error  # the disk: full, read-only... (the command line says it in one line)
    if searching:
        return HubError(f"the search of {where} failed: {error}")
    return HubError(f"the download of {file or repo} failed: {error}")
