"""Where GGUF files usually are on a user's machine.

Most people already have models downloaded by another tool; finding them saves a copy of
several gigabytes. Each tool's own environment variables are honoured first, then its
default folder under the home directory (``HOME`` is honoured too, which is how the tests
point every default at a temporary folder).
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

MAX_DEPTH = 8
"""Folders deeper than this below a search root are not entered."""


@dataclass(frozen=True)
class SearchRoot:
    """A folder to search, and which tool it belongs to."""

    path: Path
    source: str
    """``config``, ``huggingface``, ``lmstudio`` or ``llama.cpp``."""


def _home(env: Mapping[str, str]) -> Path:
    home = env.get("HOME")
    return Path(home) if home else Path.home()


def _expand(raw: str, env: Mapping[str, str]) -> Path:
    if raw == "~" or raw.startswith("~/"):
        raw = str(_home(env)) + raw[1:]
    return Path(os.path.expandvars(raw))


def _cache_home(env: Mapping[str, str]) -> Path:
    xdg = env.get("XDG_CACHE_HOME")
    return Path(xdg) if xdg else _home(env) / ".cache"


def huggingface_hub_dir(env: Mapping[str, str] = os.environ) -> Path:
    """The Hugging Face hub cache (``HF_HUB_CACHE``, else ``HF_HOME/hub``)."""
    if env.get("HF_HUB_CACHE"):
        return _expand(env["HF_HUB_CACHE"], env)
    if env.get("HF_HOME"):
        return _expand(env["HF_HOME"], env) / "hub"
    return _cache_home(env) / "huggingface" / "hub"


def lmstudio_dirs(env: Mapping[str, str] = os.environ) -> list[Path]:
    """LM Studio's model folders: the current default, the old one, and an override."""
    found = [_home(env) / ".lmstudio" / "models", _home(env) / ".cache" / "lm-studio" / "models"]
    if env.get("LMSTUDIO_MODELS_DIR"):
        found.insert(0, _expand(env["LMSTUDIO_MODELS_DIR"], env))
    return found


def llama_cpp_cache_dir(env: Mapping[str, str] = os.environ) -> Path:
    """Where ``llama-cli -hf`` downloads models (``LLAMA_CACHE``, else the user cache)."""
    if env.get("LLAMA_CACHE"):
        return _expand(env["LLAMA_CACHE"], env)
    if sys.platform == "darwin":
        return _home(env) / "Library" / "Caches" / "llama.cpp"
    if sys.platform == "win32" and env.get("LOCALAPPDATA"):
        return Path(env["LOCALAPPDATA"]) / "llama.cpp"
    return _cache_home(env) / "llama.cpp"


def search_roots(model_dirs: list[str] | tuple[str, ...] = (),
                 env: Mapping[str, str] = os.environ) -> list[SearchRoot]:
    """Every folder to search, configured folders first."""
    roots = [SearchRoot(_expand(raw, env), "config") for raw in model_dirs]
    roots.append(SearchRoot(huggingface_hub_dir(env), "huggingface"))
    roots.extend(SearchRoot(path, "lmstudio") for path in lmstudio_dirs(env))
    roots.append(SearchRoot(llama_cpp_cache_dir(env), "llama.cpp"))
    return roots


def _in_hf_snapshot(relative: Path) -> bool:
    parts = relative.parts
    return len(parts) >= 4 and parts[0].startswith("models--") and parts[1] == "snapshots"


def _reason(error: OSError) -> str:
    if isinstance(error, PermissionError):
        return "permission denied"
    return (error.strerror or str(error)).lower()


def _root_problem(root: SearchRoot) -> str | None:
    """Why ``root`` cannot be searched, when that is worth saying (None: search it, or skip it).

    Each tool's default folder is simply absent on most machines, so only a configured
    folder that is not there is reported: it is a typo or an unplugged disk. A folder that
    cannot be entered is reported whoever named it (``Path.is_dir`` raises on it).
    """
    try:
        info = root.path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return "this model_dirs folder does not exist" if root.source == "config" else None
    except OSError as error:
        return f"cannot search this folder: {_reason(error)}"
    if not stat.S_ISDIR(info.st_mode):
        return "model_dirs names it, but it is not a folder" if root.source == "config" else None
    return None


def gguf_files(root: SearchRoot, unreadable: list[tuple[Path, str]] | None = None) -> Iterator[Path]:
    """``*.gguf`` files below ``root`` (symlinks followed, loops and deep trees avoided).

    In the Hugging Face cache only ``models--*/snapshots/*/`` is searched: the ``blobs``
    folder holds the same files under hash names. Folders that cannot be searched (and a
    configured root that is missing) go to ``unreadable`` with the reason, so the model
    list can say why a model is not there instead of leaving it out without a word.
    """
    problems = unreadable if unreadable is not None else []
    problem = _root_problem(root)
    if problem is not None:
        problems.append((root.path, problem))
    if problem is not None or not root.path.is_dir():
        return

    def failed(error: OSError) -> None:
        where = Path(error.filename) if error.filename else root.path
        problems.append((where, f"cannot read this folder: {_reason(error)}"))

    seen: set[tuple[int, int]] = set()
    base_depth = len(root.path.parts)
    for folder, dirs, files in os.walk(root.path, followlinks=True, onerror=failed):
        here = Path(folder)
        try:
            info = here.stat()
        except OSError:
            dirs[:] = []
            continue
        if (info.st_dev, info.st_ino) in seen:
            dirs[:] = []
            continue
        seen.add((info.st_dev, info.st_ino))
        deep = len(here.parts) - base_depth >= MAX_DEPTH
        dirs[:] = [] if deep else sorted(d for d in dirs if not d.startswith(".") and d != "blobs")
        for name in sorted(files):
            if not name.lower().endswith(".gguf"):
                continue
            path = here / name
            if root.source == "huggingface" and not _in_hf_snapshot(path.relative_to(root.path)):
                continue
            yield path
