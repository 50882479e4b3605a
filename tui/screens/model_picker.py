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

The box under the table has the focus, so typing is never lost: words filter the rows
(``model_rows.matches``), a path (``model_rows.looks_like_path``) is checked and chosen
with Enter. The arrows move the table's cursor from the box, and Enter with words (or
nothing) typed chooses the row under it: the row the user sees chosen, never another.
The cursor starts on the model loaded now, so F5 then Enter changes nothing.
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
from textual.coordinate import Coordinate
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, Static
from textual.worker import Worker, WorkerState

from sessions.api.models import ModelCard, ModelFileError
from sessions.errors import ControllerError
from sessions.units import human_size
from tui.safe_text import inert
from tui.screens.hub_download import HubDownloadScreen
from tui.screens.model_rows import (
    COLUMNS,
    DEMO_DETAIL,
    DEMO_KEY,
    DEMO_LABEL,
    DOWNLOAD_DETAIL,
    DOWNLOAD_KEY,
    DOWNLOAD_LABEL,
    KIND_NAMES,
    LOADED_MARK,
    MEMORY_HELP,
    card_cells,
    looks_like_path,
    matches,
    row_names,
)

if TYPE_CHECKING:
    from sessions.api.chat import ModelCatalogue

__all__ = ["DEMO_KEY", "DEMO_LABEL", "DOWNLOAD_KEY", "KIND_NAMES", "LOADED_MARK", "ModelPicker", "card_cells",
           "row_names"]

PLACEHOLDER = "Type to filter the list, or the path of a .gguf file"
KEYS_HINT = "↑↓ move · enter chooses · escape closes"


class ModelPicker(ModalScreen[Path | None]):
    """Pick a model; dismisses with its path, or None on escape (or on the model loaded now)."""

    CSS_PATH = "modals.tcss"
    BINDINGS = [
        Binding("escape", "cancel", "Close", id="models.cancel"),
        Binding("down", "move(1)", "Next", show=False, id="models.next"),
        Binding("up", "move(-1)", "Previous", show=False, id="models.previous"),
        Binding("pagedown", "move(10)", "Next page", show=False, id="models.next-page"),
        Binding("pageup", "move(-10)", "Previous page", show=False, id="models.previous-page"),
    ]
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
        """Names the folders searched and the configured model (``ModelCatalogue.discover``)."""
        self._loaded = loaded
        """The model loaded now (marked in its row, the cursor starts on it), if any."""
        self.cards: list[ModelCard] = []
        self._names: list[str] = []
        self.discovered = False
        """True once the disk search is done (tests wait for it)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="picker", classes="wide"):
            yield Static("Choose a model", id="picker-title")
            table: DataTable[Text] = DataTable(id="model-table", cursor_type="row", zebra_stripes=True)
            table.can_focus = False  # the box keeps the focus: typing is never lost
            yield table
            yield Static("", id="model-detail")
            yield Input(placeholder=PLACEHOLDER, id="model-path")
            yield Static(MEMORY_HELP, id="model-help")
            yield Static("Looking for models…", id="picker-status")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*COLUMNS)
        self._fill("")
        self.query_one(Input).focus()
        self._discover()

    @property
    def typed(self) -> str:
        return self.query_one("#model-path", Input).value

    @property
    def shown_keys(self) -> list[str]:
        """The keys of the rows the filter keeps, top first (``demo``, ``download``, a card's index)."""
        table = self.query_one(DataTable)
        return [str(table.coordinate_to_cell_key(Coordinate(row, 0)).row_key.value) for row in range(table.row_count)]

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

    # -- the rows ------------------------------------------------------------------------

    def _fill(self, query: str) -> None:
        """Show the rows ``query`` keeps (a path filters nothing), the cursor on the row it
        was on when it stays, else on the model loaded, else on the first row."""
        table = self.query_one(DataTable)
        was_on = self._cursor_key() if table.row_count else self._loaded_key()
        words = "" if looks_like_path(query) else query
        table.clear()
        if matches(words, DEMO_LABEL, "demo"):
            table.add_row(Text(DEMO_LABEL, style="italic"), Text("plain"), *(Text("") for _ in COLUMNS[2:]),
                          key=DEMO_KEY)
        if matches(words, DOWNLOAD_LABEL, "download hugging face hub"):
            table.add_row(Text(DOWNLOAD_LABEL, style="italic"), *(Text("") for _ in COLUMNS[1:]), key=DOWNLOAD_KEY)
        for index, (card, name) in enumerate(zip(self.cards, self._names, strict=True)):
            if matches(words, name, str(card.path), card.quantization or "", card.architecture or ""):
                table.add_row(*card_cells(card, name), key=str(index))
        keys = self.shown_keys
        if was_on in keys:
            table.move_cursor(row=keys.index(was_on), animate=False)
        self._say_found()
        self._show_detail(self._cursor_key())

    def _loaded_key(self) -> str | None:
        """The row of the model loaded now, when it is usable (no row is loaded, else)."""
        here = self._loaded.resolve() if self._loaded is not None else None
        return next((str(index) for index, card in enumerate(self.cards)
                     if card.error is None and card.path.resolve() == here), None)

    def _cursor_key(self) -> str | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        return str(table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value)

    def _say_found(self) -> None:
        if not self.discovered:
            return
        shown = len(self.shown_keys)
        if self.typed.strip() and looks_like_path(self.typed):
            self._status(f"enter checks and loads this file · {KEYS_HINT}")
            return
        if self.typed.strip() and not self.shown_keys:
            self._status("Nothing matches: type other words, or the path of a .gguf file")
            return
        usable = sum(card.error is None for card in self.cards)
        found = f"{usable} model{'s' if usable != 1 else ''} found"
        if usable != len(self.cards):
            found += f", {len(self.cards) - usable} unusable (dimmed)"
        if self.typed.strip():
            found += f"; {shown} row{'s' if shown != 1 else ''} shown"
        self._status(f"{found} · {KEYS_HINT}")

    @on(ModelsFound)
    def _models_found(self, event: ModelsFound) -> None:
        self.cards, self._names = event.cards, event.names
        self.discovered = True
        table = self.query_one(DataTable)
        if not self.typed.strip() and table.cursor_row == 0:  # nothing chosen yet: to the model loaded now
            table.clear()
        self._fill(self.typed)

    @on(Input.Changed, "#model-path")
    def _typed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def action_move(self, delta: int) -> None:
        table = self.query_one(DataTable)
        if table.row_count:
            table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + delta)), animate=False)

    @on(DataTable.RowHighlighted, "#model-table")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail(event.row_key.value)

    def _show_detail(self, key: str | None) -> None:
        card = self._card(key)
        if card is None:
            detail = {DEMO_KEY: DEMO_DETAIL, DOWNLOAD_KEY: DOWNLOAD_DETAIL}.get(key or "", "")
        else:
            found = f", found via {card.source}" if card.source else ""
            detail = f"{inert(str(card.path))} ({human_size(card.file_size)}{found})"
            if card.error is not None:
                detail += f"\n{inert(card.error)}"
        self.query_one("#model-detail", Static).update(Text(detail))

    # -- choosing ------------------------------------------------------------------------

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

    @on(DataTable.RowSelected, "#model-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        """A row clicked: chosen, as Enter chooses the row under the cursor."""
        event.stop()
        self._choose(event.row_key.value)

    @on(Input.Submitted, "#model-path")
    def _path_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if text and looks_like_path(text):
            self._status("Checking the file…")
            self._check_path(Path(text).expanduser())
        elif not self.shown_keys:
            self._status("Nothing matches: type other words, or the path of a .gguf file", error=True)
        else:
            self._choose(self._cursor_key())

    def _choose(self, key: str | None) -> None:
        if key == DEMO_KEY:
            self._status("Making the demo model…")
            self._make_demo()
            return
        if key == DOWNLOAD_KEY:
            self.app.push_screen(HubDownloadScreen(self._models), self._downloaded)
            return
        card = self._card(key)
        if card is None:
            return
        if card.error is not None:
            self._status(f"{card.path.name} cannot be used: {card.error}", error=True)
            return
        self.dismiss(card.path)

    def _downloaded(self, path: Path | None) -> None:
        if path is not None:
            self.dismiss(path)

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
