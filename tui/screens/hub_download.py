"""Fetch a model by name from the Hugging Face Hub: search, pick, watch it download.

Typed words search the Hub for GGUF repositories (the most downloaded first); a typed
``user/repo[:quant]`` is fetched at once, and so is a repository chosen from the results
(its Q4_K_M file, as ``llamachat -hf`` would choose). The search and the download run in
thread workers; the download reports each step back as a message, drawn as a bar with
the bytes and the rate. Escape during a download stops it (the next step raises
``DownloadStopped`` in the worker) and closes the screen.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, ProgressBar, Static
from textual.worker import Worker, WorkerState

from sessions.api.models import DownloadProgress, DownloadStopped, HubModel, progress_text
from sessions.errors import ControllerError
from sessions.text_safety import inert

if TYPE_CHECKING:
    from sessions.api.chat import ModelCatalogue

QUIET_SECONDS = 3.0
"""A download that has brought nothing for this long says so beside its last figures (the
rate drawn is that of the last bytes; a stalled Hub would otherwise look busy)."""

HELP = "Enter searches the Hub for GGUF models; user/repo or user/repo:QUANT (e.g. :Q8_0) downloads it."


class HubDownloadScreen(ModalScreen[Path | None]):
    """Dismisses with the downloaded model's file, or None (escape, or stopped)."""

    CSS_PATH = "modals.tcss"
    BINDINGS = [Binding("escape", "cancel", "Close", id="hub.cancel")]

    @dataclass
    class SearchDone(Message):
        query: str
        models: list[HubModel]
        error: str | None = None

    @dataclass
    class Stepped(Message):
        step: DownloadProgress

    @dataclass
    class Downloaded(Message):
        path: Path | None
        error: str | None = None

    def __init__(self, models: ModelCatalogue) -> None:
        super().__init__()
        self._models = models
        self.found: list[HubModel] = []
        self.downloading: str | None = None
        """The name being fetched, while a download runs."""
        self._stop = threading.Event()
        self._last_step: tuple[DownloadProgress, float] | None = None
        """The last step drawn, and when it came."""

    def compose(self) -> ComposeResult:
        with Vertical(id="picker", classes="wide"):
            yield Static("Download a model from Hugging Face", id="picker-title")
            yield Input(placeholder="search, or user/repo[:quant]", id="hub-query")
            table: DataTable[Text] = DataTable(id="hub-results", cursor_type="row", zebra_stripes=True)
            yield table
            yield ProgressBar(id="hub-progress", show_eta=False)
            yield Static("", id="hub-step")
            yield Static(HELP, id="picker-status")

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns("Repository", "Downloads")
        self.query_one("#hub-progress").display = False
        self.query_one("#hub-query", Input).focus()
        self.set_interval(1.0, self._say_quiet)

    @on(Input.Submitted, "#hub-query")
    def _query_submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if "/" in text:
            self._start(text)
        elif text:
            self._status(f"Searching for {text}…")
            self._search(text)

    @on(DataTable.RowSelected, "#hub-results")
    def _result_chosen(self, event: DataTable.RowSelected) -> None:
        event.stop()
        key = event.row_key.value
        if key is not None and key.isdigit() and int(key) < len(self.found):
            self._start(self.found[int(key)].repo)

    def _start(self, name: str) -> None:
        if self.downloading is not None:
            self._status(f"{self.downloading} is downloading; escape stops it", error=True)
            return
        self.downloading = name
        self._last_step = None
        self._stop.clear()
        self._status(f"Fetching {name}… (escape stops it)")
        self._download(name)

    @work(thread=True, exclusive=True, group="hub-search", exit_on_error=False,
          description="searching the Hub")
    def _search(self, query: str) -> None:
        try:
            self.post_message(self.SearchDone(query, self._models.search_hub(query)))
        except ControllerError as error:
            self.post_message(self.SearchDone(query, [], str(error)))

    @work(thread=True, exclusive=True, group="hub-download", exit_on_error=False,
          description="downloading the model")
    def _download(self, name: str) -> None:
        def step(progress: DownloadProgress) -> None:
            if self._stop.is_set():
                raise DownloadStopped("the download was stopped")
            self.post_message(self.Stepped(progress))

        try:
            self.post_message(self.Downloaded(self._models.download(name, step)))
        except ControllerError as error:
            self.post_message(self.Downloaded(None, str(error)))

    @on(SearchDone)
    def _search_done(self, event: SearchDone) -> None:
        if event.error is not None:
            self._status(event.error, error=True)
            return
        self.found = event.models
        table = self.query_one(DataTable)
        table.clear()
        for index, model in enumerate(event.models):
            table.add_row(Text(inert(model.repo)), Text(f"{model.downloads:,}", justify="right"), key=str(index))
        if event.models:
            table.focus()
            self._status(f"{len(event.models)} found for {event.query} · enter downloads (Q4_K_M unless a "
                         "repo:QUANT is typed)")
        else:
            self._status(f"No GGUF model found for {event.query}")

    @on(Stepped)
    def _stepped(self, event: Stepped) -> None:
        bar = self.query_one("#hub-progress", ProgressBar)
        bar.display = True
        bar.update(total=event.step.total, progress=event.step.done)
        self._last_step = (event.step, time.monotonic())
        self.query_one("#hub-step", Static).update(Text(inert(progress_text(event.step))))

    def _say_quiet(self) -> None:
        """Beside the last figures, how long nothing has come (the read waits for the Hub)."""
        if self.downloading is None or self._last_step is None:
            return
        step, at = self._last_step
        quiet = time.monotonic() - at
        if quiet >= QUIET_SECONDS:
            self.query_one("#hub-step", Static).update(
                Text(inert(f"{progress_text(step)} · nothing came for {quiet:.0f} s")))

    @on(Downloaded)
    def _downloaded(self, event: Downloaded) -> None:
        self.downloading = None
        self._last_step = None
        if event.path is not None:
            self.dismiss(event.path)
        elif self._stop.is_set():
            self.dismiss(None)
        else:
            self.query_one("#hub-progress").display = False
            self._status(event.error or "the download failed", error=True)

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        """One place that turns an unexpected worker failure into a visible message."""
        if event.state == WorkerState.ERROR:
            self.downloading = None
            self._status(f"{event.worker.description} failed: {event.worker.error}", error=True)

    def _status(self, text: str, error: bool = False) -> None:
        status = self.query_one("#picker-status", Static)
        status.set_class(error, "-error")
        status.update(Text(inert(text)))

    def action_cancel(self) -> None:
        if self.downloading is not None:
            self._stop.set()  # the worker stops at its next step and closes the screen
            self._status(f"Stopping the download of {self.downloading}…")
            return
        self.dismiss(None)
