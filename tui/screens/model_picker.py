"""Choose the model to chat with: found on disk, the demo model, one downloaded by name, or
a typed path.

The table says what matters before loading gigabytes: the memory kind (it decides how
llamachat checkpoints the model's state, see ``MemoryKind``), the size, the
quantisation and the trained context length. Files that cannot be used stay listed,
dimmed, with the reason, because "why is my model not here?" is the first question
otherwise. The models come from the controller's catalogue (``SessionController.models``),
those of saved chats and recent downloads first; rows of one name say their quantisation
or their file. Searching the disk and making the demo model both take time, so they run
in thread workers and the screen opens at once; the download row opens
``HubDownloadScreen``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Static
from textual.worker import Worker, WorkerState

from sessions.api.models import ModelCard, ModelFileError
from sessions.errors import ControllerError
from sessions.memory_kind import MemoryKind
from sessions.units import human_count, human_size
from tui.safe_text import inert
from tui.screens.hub_download import HubDownloadScreen

if TYPE_CHECKING:
    from sessions.api.chat import ModelCatalogue

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


class ModelPicker(ModalScreen[Path | None]):
    """Pick a model; dismisses with its path, or None on escape."""

    CSS_PATH = "modals.tcss"
    BINDINGS = [Binding("escape", "cancel", "Close", id="models.cancel")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]
    """On a short terminal the legend line goes, so the table keeps its rows."""

    @dataclass
    class ModelsFound(Message):
        cards: list[ModelCard]
        names: list[str]
        """What each row's name column says (``row_names``, which reads the disk)."""

    @dataclass
    class PathReady(Message):
        """A model file to return (the demo model was made, or a typed path checked)."""

        path: Path | None
        error: str | None = None

    def __init__(self, models: ModelCatalogue, config: Any = None, *, loaded: Path | None = None) -> None:
        super().__init__()
        self._models = models
        self._config = config
        self._loaded = loaded
        """The model loaded now (marked in its row), if any."""
        """Names the folders searched and the configured model (``ModelCatalogue.discover``)."""
        self.cards: list[ModelCard] = []
        self.discovered = False
        """True once the disk search is done (tests wait for it)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="picker", classes="wide"):
            yield Static("Choose a model", id="picker-title")
            table: DataTable[Text] = DataTable(id="model-table", cursor_type="row", zebra_stripes=True)
            yield table
            yield Static("", id="model-detail")
            yield Input(placeholder="…or type the path of a .gguf file and press enter",
                        id="model-path")
            yield Static(MEMORY_HELP, id="model-help")
            yield Static("Looking for models…", id="picker-status")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(*COLUMNS)
        table.add_row(Text(DEMO_LABEL, style="italic"), Text("plain"),
                      *(Text("") for _ in COLUMNS[2:]), key=DEMO_KEY)
        table.add_row(Text(DOWNLOAD_LABEL, style="italic"), *(Text("") for _ in COLUMNS[1:]), key=DOWNLOAD_KEY)
        table.focus()
        self._discover()

    @work(thread=True, exclusive=True, group="model-discovery", exit_on_error=False,
          description="looking for GGUF models")
    def _discover(self) -> None:
        cards = self._models.discover(self._config)
        self.post_message(self.ModelsFound(cards, row_names(cards, self._loaded)))

    @work(thread=True, exclusive=True, group="model-demo", exit_on_error=False,
          description="making the demo model")
    def _make_demo(self) -> None:
        try:
            self.post_message(self.PathReady(self._models.demo_model()))
        except ControllerError as error:
            self.post_message(self.PathReady(None, str(error)))

    @work(thread=True, exclusive=True, group="model-path", exit_on_error=False,
          description="checking the model file")
    def _check_path(self, path: Path) -> None:
        try:
            card = self._models.read_card(path)
        except ModelFileError as error:
            self.post_message(self.PathReady(None, str(error)))
            return
        if card.error is not None:
            self.post_message(self.PathReady(None, f"{path.name}: {card.error}"))
        else:
            self.post_message(self.PathReady(path))

    @on(ModelsFound)
    def _models_found(self, event: ModelsFound) -> None:
        self.cards = event.cards
        self.discovered = True
        table = self.query_one(DataTable)
        for index, (card, name) in enumerate(zip(event.cards, event.names, strict=True)):
            table.add_row(*card_cells(card, name), key=str(index))
        usable = sum(card.error is None for card in event.cards)
        found = f"{usable} model{'s' if usable != 1 else ''} found"
        if usable != len(event.cards):
            found += f", {len(event.cards) - usable} unusable (dimmed)"
        self._status(f"{found} · enter chooses, escape closes")

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        """One place that turns an unexpected worker failure into a visible message."""
        if event.state == WorkerState.ERROR:
            self._status(f"{event.worker.description} failed: {event.worker.error}", error=True)

    @on(PathReady)
    def _path_ready(self, event: PathReady) -> None:
        if event.path is not None:
            self.dismiss(event.path)
        else:
            self._status(event.error or "that file cannot be used", error=True)

    @on(DataTable.RowHighlighted, "#model-table")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        card = self._card(event.row_key.value)
        if card is None:
            detail = {DEMO_KEY: DEMO_DETAIL, DOWNLOAD_KEY: DOWNLOAD_DETAIL}.get(event.row_key.value or "", "")
        else:
            found = f", found via {card.source}" if card.source else ""
            detail = f"{inert(str(card.path))} ({human_size(card.file_size)}{found})"
            if card.error is not None:
                detail += f"\n{inert(card.error)}"
        self.query_one("#model-detail", Static).update(Text(detail))

    @on(DataTable.RowSelected, "#model-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value == DEMO_KEY:
            self._status("Making the demo model…")
            self._make_demo()
            return
        if event.row_key.value == DOWNLOAD_KEY:
            self.app.push_screen(HubDownloadScreen(self._models), self._downloaded)
            return
        card = self._card(event.row_key.value)
        if card is None:
            return
        if card.error is not None:
            self._status(f"{card.path.name} cannot be used: {card.error}", error=True)
            return
        self.dismiss(card.path)

    def _downloaded(self, path: Path | None) -> None:
        if path is not None:
            self.dismiss(path)

    @on(Input.Submitted, "#model-path")
    def _path_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if text:
            self._status("Checking the file…")
            self._check_path(Path(text).expanduser())

    def _card(self, key: str | None) -> ModelCard | None:
        if key is None or not key.isdigit() or int(key) >= len(self.cards):
            return None
        return self.cards[int(key)]

    def _status(self, text: str, error: bool = False) -> None:
        status = self.query_one("#picker-status", Static)
        status.set_class(error, "-error")
        status.update(Text(inert(text)))

    def action_cancel(self) -> None:
        self.dismiss(None)
