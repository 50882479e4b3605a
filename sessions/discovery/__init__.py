"""Finding GGUF models on disk and describing them from their headers.

``discover_models`` searches the configured folders and the caches of the usual download
tools; ``read_model_card`` describes one file. Neither loads llama.cpp, gguf or numpy, so
the model list and ``llamachat models`` are instant. May import only the core's small
modules; never llama.cpp's bindings (they import this package) or the engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from sessions.discovery.gguf_header import GGUFHeader, ModelFileError, read_gguf_header
from sessions.discovery.layout_checks import checkpoint_problem, recorded_problems
from sessions.discovery.load_check import check_before_load
from sessions.discovery.model_card import (
    ModelCard,
    memory_kind_for,
    read_model_card,
    split_part_paths,
)
from sessions.discovery.search_paths import SearchRoot, gguf_files, search_roots

__all__ = [
    "GGUFHeader",
    "check_before_load",
    "ModelCard",
    "ModelFileError",
    "SearchRoot",
    "discover_models",
    "memory_kind_for",
    "read_gguf_header",
    "read_model_card",
    "search_roots",
]


def discover_models(config: object | None = None, *, roots: list[SearchRoot] | None = None,
                    include_auxiliary: bool = False, also: Sequence[tuple[Path, str]] = ()) -> list[ModelCard]:
    """Every model found, deduplicated by real path and sorted by name.

    ``config`` supplies ``model_dirs`` and ``model`` (the configured model is listed even
    outside the searched folders); ``also`` names more files (path, source), listed
    wherever they are as long as they exist (the models of saved chats, say). A file that
    cannot be read is listed with ``error`` set, and so is a folder that cannot be searched
    or a configured one that is missing; adapters, vision projectors and vocabulary-only
    files are left out unless ``include_auxiliary``. Later parts of a split model are folded into its first part.
    """
    model_dirs = list(getattr(config, "model_dirs", None) or [])
    if roots is None:
        roots = search_roots(model_dirs)
    candidates: list[tuple[Path, str]] = []
    configured = getattr(config, "model", None)
    if configured:
        candidates.append((Path(configured).expanduser(), "config"))
    candidates.extend((path, source) for path, source in also if path.is_file())
    folders: list[ModelCard] = []
    for root in roots:
        unreadable: list[tuple[Path, str]] = []
        candidates.extend((path, root.source) for path in gguf_files(root, unreadable))
        folders.extend(ModelCard(path=path, name=path.name or str(path), source=root.source, error=why)
                       for path, why in unreadable)
    cards: dict[Path, ModelCard] = {}
    for path, source in candidates:
        real = _real_path(path)
        if real in cards:
            continue
        try:
            card = read_model_card(path).with_source(source)
        except ModelFileError as error:
            card = ModelCard.unreadable(path, str(error), source)
        cards[real] = card
    for folder in folders:
        cards.setdefault(_real_path(folder.path), folder)
    found = [card for card in _fold_split_parts(list(cards.values())) if include_auxiliary or not card.is_auxiliary]
    problems = recorded_problems()
    return sorted((_with_checkpoint_problem(card, problems) for card in found),
                  key=lambda card: (card.name.casefold(), str(card.path)))


def _with_checkpoint_problem(card: ModelCard, problems: dict[str, str]) -> ModelCard:
    """``card`` with what its last load found about its saved states, when that is a problem."""
    if card.error or not problems:
        return card
    problem = checkpoint_problem(card.path, problems)
    return card if problem is None else replace(card, checkpoint_problem=problem)


def _real_path(path: Path) -> Path:
    """The file ``path`` names, to list a file reached by two names once.

    A symbolic link loop raises ``RuntimeError`` here before Python 3.13 (``OSError``
    after); such a name is kept as it is and its card says why it cannot be read.
    """
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def _fold_split_parts(cards: list[ModelCard]) -> list[ModelCard]:
    """Drop parts 2..n of split models whose first part is beside them; flag orphans.

    The first part's card covers the others (llama.cpp loads it and finds them), whether
    or not it is listed itself: it may be a vision projector left out of the list, or the
    same file as one listed under another name.
    """
    kept = []
    for card in cards:
        if card.is_split and card.split_index > 0:
            first = split_part_paths(card.path, card.split_count)[0]
            if first.is_file():
                continue
            if card.readable:
                card = ModelCard.unreadable(
                    card.path, f"part {card.split_index + 1} of {card.split_count} of a split "
                    f"model whose first part ({first.name}) is missing", card.source)
        kept.append(card)
    return kept
