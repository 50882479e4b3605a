"""What the model picker's table says of each model: its rows, their names and cells,
and which rows a typed filter keeps.

Apart from the picker (``model_picker``) so the screen keeps to what the user does with
the table, and this module to what the table says.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from sessions.api.models import ModelCard
from sessions.memory_kind import MemoryKind
from sessions.units import human_count
from tui.safe_text import inert

DEMO_KEY = "demo"
DEMO_LABEL = "Demo model (random weights, replies are random text)"
DOWNLOAD_KEY = "download"
DOWNLOAD_LABEL = "Download a model by name from Hugging Face…"
DOWNLOAD_DETAIL = ("Search the Hub for GGUF models, or type user/repo[:quant]; the file goes to the "
                   "Hugging Face cache (HF_HOME), where this list finds it.")
KIND_NAMES = {MemoryKind.PLAIN: "plain", MemoryKind.SWA: "SWA", MemoryKind.HYBRID: "hybrid",
              MemoryKind.RECURRENT: "recurrent"}
COLUMNS = ("Model", "Memory", "Params", "Quant", "Context")
NAME_LIMIT = 54
"""Longest name cell; a longer reason is cut here and shown whole in the detail line."""
DEMO_DETAIL = "A tiny llama model with random weights, made on this machine in seconds."
MEMORY_HELP = ("Memory: plain = full KV cache · SWA = sliding-window attention · "
               "hybrid = attention + recurrent layers · recurrent = running state only")


def _cut(text: str, limit: int = NAME_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


LOADED_MARK = "(loaded)"


def row_names(cards: list[ModelCard], loaded: Path | None = None) -> list[str]:
    """What the name column says of each card: its name; where two cards share a name,
    their quantisation if that tells them apart, else their file (then its folder, then
    the whole path); and a mark on the model loaded now."""

    def counted(labels: list[str]) -> dict[str, int]:
        return {label: labels.count(label) for label in labels}

    def quants_differ(name: str) -> bool:
        quants = [card.quantization for card in cards if card.name == name]
        return None not in quants and len(set(quants)) == len(quants)

    names = [card.name for card in cards]
    twins = counted(names)
    names = [card.name if twins[card.name] == 1
             else f"{card.name} · {card.quantization}" if quants_differ(card.name)
             else f"{card.name} · {card.path.name}" for card in cards]
    for tell_apart in (lambda card: f"{card.path.parent.name}/{card.path.name}", lambda card: str(card.path)):
        twins = counted(names)
        names = [f"{card.name} · {tell_apart(card)}" if twins[name] > 1 else name
                 for card, name in zip(cards, names, strict=True)]
    here = loaded.resolve() if loaded is not None else None
    return [f"{name} {LOADED_MARK}" if here is not None and card.path.resolve() == here else name
            for card, name in zip(cards, names, strict=True)]


def card_cells(card: ModelCard, name_shown: str | None = None) -> tuple[Text, ...]:
    """One table row; an unusable file is dimmed and says why in the name column.
    ``name_shown``: the name as ``row_names`` tells it apart (default: the card's)."""
    name = inert(card.name if name_shown is None else name_shown)
    if card.error is not None:
        return (Text(_cut(f"{name} — {inert(card.error)}"), style="dim"),
                *(Text("—", style="dim") for _ in COLUMNS[1:]))
    return (
        Text(_cut(name)),
        Text(KIND_NAMES.get(card.memory_kind, "?") if card.memory_kind else "?"),
        Text(human_count(card.parameter_count) if card.parameter_count else "—", justify="right"),
        Text(card.quantization or "—"),
        Text(f"{card.context_length:,}" if card.context_length else "—", justify="right"),
    )


def matches(query: str, *texts: str) -> bool:
    """Whether every word of ``query`` is in one of ``texts`` (any case): the filter the
    picker's box applies as it is typed. An empty query keeps every row."""
    haystack = " ".join(texts).casefold()
    return all(word in haystack for word in query.casefold().split())


def looks_like_path(text: str) -> bool:
    """Typed text that names a file rather than filters the list: it has a folder in it,
    starts at the home folder, or is a ``.gguf`` file's name."""
    text = text.strip()
    return "/" in text or text.startswith("~") or text.casefold().endswith(".gguf")
