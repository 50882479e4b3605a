"""Small modal dialogs: confirm a destructive step, type a line of text, export a session.

Each dialog returns its answer through ``dismiss`` so the caller writes
``self.app.push_screen(ConfirmScreen(...), callback)`` (or awaits ``push_screen_wait``
in a worker) and never reaches into the dialog's widgets. The focused button is the one
Enter should press: the step asked about, when it can be undone (a deletion Ctrl+Z brings
back, a model changed back with F5), and "Cancel" when it cannot.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, RadioButton, RadioSet, Static
from textual.widgets.button import ButtonVariant

from sessions.api.library import ExportKind
from sessions.errors import LlamachatError
from tui.safe_text import for_input, inert

EXTENSIONS = {"markdown": ".md", "json": ".json"}


class Exporter(Protocol):
    """Writes the open session to a file (``SessionController.export_session``)."""

    def export_session(self, path: Path, kind: ExportKind, *, whole_tree: bool = False) -> Path: ...


class ConfirmScreen(ModalScreen[bool]):
    """Ask a yes/no question; True only when the user confirms explicitly."""

    CSS_PATH = "modals.tcss"
    BINDINGS = [
        Binding("escape,n", "answer(False)", "Cancel", id="confirm.no"),
        Binding("y", "answer(True)", "Confirm", id="confirm.yes"),
    ]

    def __init__(self, question: str, yes_label: str = "Delete", *, yes_variant: ButtonVariant = "error",
                 enter_confirms: bool = True) -> None:
        super().__init__()
        self._question = question
        self._yes_label = yes_label
        self._yes_variant = yes_variant
        """"error" for a destructive step, "primary" for a choice that loses nothing."""
        self._enter_confirms = enter_confirms
        """The yes button has the focus (False: a step that cannot be undone, Cancel has it)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(inert(self._question)), id="dialog-question")
            with Horizontal(classes="dialog-buttons"):
                yield Button(self._yes_label, variant=self._yes_variant, id="dialog-yes")
                yield Button("Cancel", id="dialog-no")

    def on_mount(self) -> None:
        self.query_one("#dialog-yes" if self._enter_confirms else "#dialog-no", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "dialog-yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


@dataclass(frozen=True)
class Choice:
    """One button of a ``ChoiceScreen``."""

    id: str
    label: str
    variant: ButtonVariant = "default"


class ChoiceScreen(ModalScreen[str | None]):
    """Ask a question with several answers; dismisses with the id of the one pressed, None
    on escape. The first choice has the focus: the one Enter presses."""

    CSS_PATH = "modals.tcss"
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="choice.cancel")]

    def __init__(self, question: str, choices: list[Choice]) -> None:
        super().__init__()
        self._question = question
        self._choices = choices

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(Text(inert(self._question)), id="dialog-question")
            with Horizontal(classes="dialog-buttons"):
                for choice in self._choices:
                    yield Button(choice.label, variant=choice.variant, id=f"choice-{choice.id}")
                yield Button("Cancel", id="dialog-no")

    def on_mount(self) -> None:
        self.query_one(f"#choice-{self._choices[0].id}", Button).focus()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        button = event.button.id or ""
        self.dismiss(button.removeprefix("choice-") if button.startswith("choice-") else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class TextPrompt(ModalScreen[str | None]):
    """Ask for one line of text (a new title...); None on escape."""

    CSS_PATH = "modals.tcss"
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="prompt.cancel")]

    def __init__(self, title: str, initial: str = "", *, allow_empty: bool = False) -> None:
        super().__init__()
        self._title = title
        self._initial = initial
        self._allow_empty = allow_empty

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self._title, id="dialog-question", markup=False)
            yield Input(for_input(self._initial), id="prompt-input", select_on_focus=True)
            yield Static("", id="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("OK", variant="primary", id="dialog-yes")
                yield Button("Cancel", id="dialog-no")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted)
    @on(Button.Pressed, "#dialog-yes")
    def _accept(self, event: Input.Submitted | Button.Pressed) -> None:
        event.stop()
        value = self.query_one(Input).value.strip()
        if not value and not self._allow_empty:
            self.query_one("#dialog-error", Static).update("Type something, or press escape.")
            return
        self.dismiss(value)

    @on(Button.Pressed, "#dialog-no")
    def action_cancel(self) -> None:
        self.dismiss(None)


def default_export_path(session_id: int, kind: str) -> str:
    return f"~/llamachat-{session_id}{EXTENSIONS[kind]}"


class ExportScreen(ModalScreen[Path | None]):
    """Export one session to a file; returns the written path, or None if cancelled.

    Problems (a missing folder, no permission, a database error) are shown inside the
    dialog in plain words so the user can fix the path and try again. An existing file
    is only replaced after a second press of "Export".
    """

    CSS_PATH = "modals.tcss"
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="export.cancel")]

    @dataclass
    class Written(Message):
        """The export worker finished: the path written, or the problem."""

        path: Path | None
        error: str | None = None

    def __init__(self, exporter: Exporter, session_id: int) -> None:
        super().__init__()
        self._exporter = exporter
        self._session_id = session_id
        """Names the default file."""
        self._replace_ok: Path | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            yield Label("Export this session", id="dialog-question")
            with Horizontal(id="export-choices"):
                with RadioSet(id="export-format"):
                    yield RadioButton("Markdown (to read)", value=True, id="format-markdown")
                    yield RadioButton("JSON (to import again)", id="format-json")
                with RadioSet(id="export-scope"):
                    yield RadioButton("The active branch", value=True, id="scope-branch")
                    yield RadioButton("Every branch", id="scope-tree")
            yield Input(default_export_path(self._session_id, "markdown"), id="export-path")
            yield Static("", id="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Export", variant="primary", id="dialog-yes")
                yield Button("Cancel", id="dialog-no")

    @property
    def kind(self) -> ExportKind:
        return "json" if self.query_one("#format-json", RadioButton).value else "markdown"

    @property
    def whole_tree(self) -> bool:
        return self.kind == "json" or self.query_one("#scope-tree", RadioButton).value

    @on(RadioSet.Changed, "#export-format")
    def _format_changed(self) -> None:
        kind = self.kind
        self.query_one("#export-scope", RadioSet).disabled = kind == "json"
        path_input = self.query_one("#export-path", Input)
        stem, suffix = os.path.splitext(path_input.value)
        if suffix.lower() in EXTENSIONS.values():
            path_input.value = stem + EXTENSIONS[kind]
        self._error("JSON always holds every branch." if kind == "json" else "")

    @on(Input.Submitted, "#export-path")
    @on(Button.Pressed, "#dialog-yes")
    def _export_pressed(self, event: Input.Submitted | Button.Pressed) -> None:
        event.stop()
        text = self.query_one("#export-path", Input).value.strip()
        if not text:
            self._error("Type the path of the file to write.")
            return
        path = Path(text).expanduser()
        if not path.parent.is_dir():
            self._error(f"The folder {path.parent} does not exist.")
            return
        if path.is_dir():
            self._error(f"{path} is a folder; type a file name.")
            return
        if path.exists() and self._replace_ok != path:
            self._replace_ok = path
            self._error(f"{path.name} already exists: press Export again to replace it.")
            return
        self._error("Writing…")
        self._write(path, self.kind, self.whole_tree)

    @work(thread=True, exclusive=True, group="export", exit_on_error=False,
          description="exporting the session")
    def _write(self, path: Path, kind: ExportKind, whole_tree: bool) -> None:
        try:
            written = self._exporter.export_session(path, kind, whole_tree=whole_tree)
        except OSError as error:
            self.post_message(self.Written(None, f"Could not write {path}: {error.strerror or error}."))
        except LlamachatError as error:
            self.post_message(self.Written(None, f"Could not export: {error}"))
        else:
            self.post_message(self.Written(written))

    @on(Written)
    def _written(self, event: Written) -> None:
        if event.path is not None:
            self.dismiss(event.path)
        else:
            self._error(event.error or "Could not export.")

    def _error(self, text: str) -> None:
        self.query_one("#dialog-error", Static).update(Text(inert(text)))

    @on(Button.Pressed, "#dialog-no")
    def action_cancel(self) -> None:
        self.dismiss(None)
