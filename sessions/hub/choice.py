"""Which files of a repository ``-hf user/repo[:quant]`` fetches, chosen as llama.cpp does.

llama.cpp (``common/download.cpp``: ``common_download_split_repo_tag``,
``find_best_model``, ``get_split_files``) takes the text after the last ``:`` as the
quantisation tag; without one it tries ``Q4_K_M`` then ``Q8_0``, then the first GGUF.
A tag matches a file name containing it followed by ``.`` or ``-``, in any case. Vision
projectors, importance matrices and draft-model files are never the model. A split model
is fetched whole (every ``-0000i-of-0000N`` part), and opened from its first part.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sessions.hub.errors import HubError

DEFAULT_TAGS = ("Q4_K_M", "Q8_0")
"""Tried in this order when the name has no ``:quant``."""
NOT_MODELS = ("mmproj", "imatrix", "mtp-", "eagle3-", "dflash-", "dspark-")
"""Parts of a file name that mark a sidecar (projector, imatrix, draft model), not the model."""
_SPLIT = re.compile(r"^(?P<prefix>.+)-(?P<index>[0-9]{5})-of-(?P<count>[0-9]{5})$", re.IGNORECASE)
_TAG = re.compile(r"[-.](?P<tag>[A-Z0-9_]+)$", re.IGNORECASE)
_REPO_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class HubSpec:
    """``user/repo[:quant]``: a repository and, optionally, the quantisation asked for."""

    repo: str
    tag: str = ""

    def __str__(self) -> str:
        return f"{self.repo}:{self.tag}" if self.tag else self.repo


def parse_spec(text: str) -> HubSpec:
    """``user/repo[:quant]`` read as llama.cpp reads it; ``HubError`` for anything else."""
    raw = text.strip()
    parts = raw.split(":")
    repo, tag = parts[0], parts[-1] if len(parts) > 1 else ""  # llama.cpp's reading of the colons
    names = repo.split("/")
    if len(names) != 2 or not all(_REPO_PART.match(name) for name in names) or ".." in repo:
        raise HubError(f"{text.strip()!r} is not a model name: expected user/repo or user/repo:quant "
                       "(for example ggml-org/gemma-3-270m-it-GGUF:Q8_0)")
    if tag and not re.fullmatch(r"[A-Za-z0-9_.-]+", tag):
        raise HubError(f"{tag!r} is not a quantisation tag (for example Q4_K_M or Q8_0)")
    return HubSpec(repo, tag)


@dataclass(frozen=True)
class SplitInfo:
    """What a GGUF file name says: the name without its part suffix, tag, part and count."""

    prefix: str
    tag: str
    index: int
    count: int


def split_info(path: str) -> SplitInfo | None:
    """The parts of a ``.gguf`` name (None for any other file), as ``get_gguf_split_info``."""
    if not path.endswith(".gguf"):
        return None
    prefix = path[: -len(".gguf")]
    index = count = 1
    split = _SPLIT.match(prefix)
    if split:
        prefix, index, count = split["prefix"], int(split["index"]), int(split["count"])
    tag = _TAG.search(prefix)
    return SplitInfo(prefix, tag["tag"].upper() if tag else "", index, count)


def is_model_file(path: str) -> bool:
    """A ``.gguf`` that is a model, not a sidecar (``gguf_filename_is_model``)."""
    name = path.rsplit("/", 1)[-1]
    return path.endswith(".gguf") and not any(word in name for word in NOT_MODELS)


def _first_part(path: str) -> bool:
    info = split_info(path)
    return info is not None and (info.count <= 1 or info.index == 1)


def best_model(files: list[str], tag: str = "") -> str | None:
    """The file llama.cpp opens for ``tag`` (None: no file matches)."""
    for wanted in (tag,) if tag else DEFAULT_TAGS:
        pattern = re.compile(re.escape(wanted) + r"[.-]", re.IGNORECASE)
        for path in files:
            if is_model_file(path) and pattern.search(path) and _first_part(path):
                return path
    if not tag:
        return next((path for path in files if is_model_file(path) and _first_part(path)), None)
    return None


def model_files(files: list[str], tag: str = "") -> list[str]:
    """Every file to fetch for ``tag``, the one to open first; ``HubError`` if none fits."""
    primary = best_model(files, tag)
    if primary is None:
        ggufs = sorted(path for path in files if is_model_file(path))
        if not ggufs:
            raise HubError("the repository holds no GGUF model file")
        tags = sorted({info.tag for path in ggufs if (info := split_info(path)) and info.tag})
        raise HubError(f"the repository has no {tag} file; its quantisations: {', '.join(tags) or 'none named'}")
    first = split_info(primary)
    assert first is not None  # best_model returns .gguf files only
    if first.count <= 1:
        return [primary]
    parts = [path for path in files
             if (info := split_info(path)) and info.count == first.count and info.prefix == first.prefix]
    parts.sort(key=lambda path: split_info(path).index)  # type: ignore[union-attr]
    if len(parts) != first.count:
        raise HubError(f"{primary} is part 1 of {first.count}, but the repository holds {len(parts)} of them")
    return parts


def quant_tags(files: list[str]) -> list[str]:
    """The quantisations a repository offers (its model files' tags), in file order."""
    seen: dict[str, None] = {}
    for path in files:
        info = split_info(path)
        if info and info.tag and is_model_file(path) and _first_part(path):
            seen.setdefault(info.tag)
    return list(seen)
