"""Choosing the text file to attach (Alt+A): a typed path with Tab completion, beside the
files of the folder it points into.

The box has the focus: what is typed of a name filters the files listed (``FileList``,
Textual's ``DirectoryTree`` over the folder typed), Tab completes it as a shell does
(``tui.path_completion``), ↓ goes into the list, where Enter on a file chooses it and on a
folder opens it. Enter in the box chooses the path typed (a folder typed goes there).
Every look at the disk runs in a thread worker: the folder's listing (the tree's own),
and what Tab and the box's text need. The dialog returns the path; reading the file is
the caller's (``attach_flow``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, DirectoryTree, Input, Label, Static

from tui.path_completion import completed, keeps, split_typed
from tui.safe_text import inert

TITLE = "Attach a text file to your message"
HINT = "Tab completes the path · ↓ to the files · Enter attaches · Esc cancels"


class FileList(DirectoryTree):
    """The files of one folder, those whose names hold what is typed; its folders open in place."""

    DEFAULT_CSS = "FileList { height: 1fr; min-height: 3; }"

    def __init__(self, path: Path, *, id: str | None = None) -> None:
        super().__init__(path, id=id)
        self.show_root = False
        self.typed = ""
        """The start of a name typed in the box: the folder's entries are kept by it."""

    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        """In the folder typed, the entries ``typed`` keeps; inside a folder opened, every one
        but the dot files. Runs in the tree's loading thread."""
        root = Path(self.path).expanduser().resolve()
        return [path for path in paths if keeps(path.name, self.typed if path.parent == root else "")]


class AttachPicker(ModalScreen[Path | None]):
    """Pick a file to attach; dismisses with its path, or None on escape."""

    CSS_PATH = "modals.tcss"
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="attach.cancel"),
        Binding("tab", "complete", "Complete the path", show=False, priority=True, id="attach.complete"),
    ]

    @dataclass
    class Looked(Message):
        """What the disk says of the text typed: its folder, and whether it is a folder itself."""

        text: str
        folder: Path | None
        """The folder its name is typed in, when there is one (None: no such folder)."""
        is_folder: bool

    @dataclass
    class Completed(Message):
        text: str
        """What was typed when Tab was pressed."""
        completion: str | None

    def __init__(self, start: str = "~/") -> None:
        super().__init__()
        self._start = start
        self._typed_folder = False
        """The text in the box names a folder (Enter goes there rather than choosing it)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide tall"):
            yield Label(TITLE, id="dialog-question")
            yield Input(self._start, id="attach-path")
            yield FileList(Path(split_typed(self._start).folder), id="attach-files")
            yield Static(HINT, id="attach-hint")
            yield Static("", id="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Attach", variant="primary", id="dialog-yes")
                yield Button("Cancel", id="dialog-no")

    def on_mount(self) -> None:
        box = self.query_one("#attach-path", Input)
        box.focus()
        box.cursor_position = len(box.value)

    @property
    def files(self) -> FileList:
        return self.query_one(FileList)

    @property
    def typed(self) -> str:
        return self.query_one("#attach-path", Input).value

    # -- following the box -----------------------------------------------------------------

    @on(Input.Changed, "#attach-path")
    def _changed(self, event: Input.Changed) -> None:
        self._error("")
        self._typed_folder = False  # until the look at the disk says
        self._look(event.value)

    @work(thread=True, exclusive=True, group="attach-look", exit_on_error=False, description="reading the folder")
    def _look(self, text: str) -> None:
        typed = split_typed(text)
        folder = typed.folder.expanduser()
        whole = Path(text).expanduser() if text else None
        self.post_message(self.Looked(text, folder if folder.is_dir() else None,
                                      whole is not None and whole.is_dir()))

    @on(Looked)
    def _looked(self, event: Looked) -> None:
        if event.text != self.typed:
            return  # typed on since: a newer look follows
        self._typed_folder = event.is_folder
        if event.folder is None:
            return
        files, name = self.files, split_typed(event.text).name
        if Path(files.path) != event.folder:
            files.typed = name
            files.path = event.folder  # lists it anew, kept by ``typed``
        elif files.typed != name:
            files.typed = name
            files.reload()

    # -- Tab ---------------------------------------------------------------------------------

    def action_complete(self) -> None:
        if self.focused is not self.query_one("#attach-path", Input):
            self.focus_next()
            return
        self._complete(self.typed)

    @work(thread=True, exclusive=True, group="attach-complete", exit_on_error=False,
          description="completing the path")
    def _complete(self, text: str) -> None:
        folder = split_typed(text).folder
        try:
            entries = [(entry.name, entry.is_dir()) for entry in folder.iterdir()]
        except OSError:
            entries = []
        self.post_message(self.Completed(text, completed(text, entries)))

    @on(Completed)
    def _completed(self, event: Completed) -> None:
        box = self.query_one("#attach-path", Input)
        if event.text != box.value:
            return
        if event.completion is None:
            self._error(f"Nothing in {inert(str(split_typed(event.text).folder))} starts with "
                        f"“{inert(split_typed(event.text).name)}”.")
            return
        box.value = event.completion
        box.cursor_position = len(box.value)

    # -- choosing ------------------------------------------------------------------------------

    def key_down(self) -> None:
        """↓ in the box goes into the list of files."""
        if self.focused is self.query_one("#attach-path", Input):
            self.files.focus()

    @on(DirectoryTree.FileSelected)
    def _file_chosen(self, event: DirectoryTree.FileSelected) -> None:
        event.stop()
        if event.node is self.files.root:  # the folder typed, missing: Textual takes it for a file
            return
        self.dismiss(event.path)

    @on(Input.Submitted, "#attach-path")
    @on(Button.Pressed, "#dialog-yes")
    def _accept(self, event: Input.Submitted | Button.Pressed) -> None:
        event.stop()
        text = self.typed.strip()
        if not text:
            self._error("Type the path of a file, or choose one in the list.")
        elif self._typed_folder and not text.endswith("/"):
            box = self.query_one("#attach-path", Input)
            box.value = text + "/"  # a folder: Enter goes into it
            box.cursor_position = len(box.value)
        elif self._typed_folder:
            self._error("That is a folder: choose a file in it (↓), or type its name.")
        else:
            self.dismiss(Path(text).expanduser())

    def _error(self, words: str) -> None:
        self.query_one("#dialog-error", Static).update(Text(words))

    @on(Button.Pressed, "#dialog-no")
    def action_cancel(self) -> None:
        self.dismiss(None)
