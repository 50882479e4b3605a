"""Writing a session to a file: the one writer behind ``llamachat export`` and the app's dialog.

Chats are private, so an export is always a 0600 file, replacing any file of that name in
one durable step (a new file, not the old one truncated: an existing file's wider mode
is not kept, and a crash leaves the old file or the new one, never half of either).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from sessions.durable import write_atomically
from sessions.exchange.builder import ExchangeError
from sessions.exchange.json_format import export_json
from sessions.exchange.markdown import export_markdown
from sessions.store import SessionStore

ExportKind = Literal["markdown", "json"]
"""Markdown reads well (the active branch, or every branch); JSON imports back losslessly."""


def export_text(store: SessionStore, session_id: int, kind: ExportKind, *, whole_tree: bool = False) -> str:
    """The file's text, ending with a newline; JSON always holds every branch."""
    if kind == "json":
        return json.dumps(export_json(store, session_id), ensure_ascii=False, indent=1) + "\n"
    text = export_markdown(store, session_id, whole_tree=whole_tree)
    return text if text.endswith("\n") else text + "\n"


def write_export(store: SessionStore, session_id: int, path: Path | str, kind: ExportKind, *,
                 whole_tree: bool = False) -> Path:
    """Write the export to ``path`` (0600, atomically) and return the path written.

    Raises ``ExchangeError`` when the folder is missing or ``path`` is a folder or any
    other thing that is not a regular file, and ``OSError`` for what the file system
    refuses. The export is renamed over ``path``, so ``-o /dev/stdout`` or a FIFO would be
    replaced by a file (or, for root, ``/dev/null`` itself): such a target is refused. A
    ``path`` that is a symbolic link stays one: the file it leads to is replaced.
    """
    given = path = Path(path)
    if path.is_symlink():
        path = path.resolve()
    if not path.parent.is_dir():
        raise ExchangeError(f"cannot write {path}: folder {path.parent} does not exist")
    if path.is_dir():
        raise ExchangeError(f"cannot write {path}: it is a folder")
    if path.exists() and not path.is_file():  # through links too: /dev/stdout is one
        raise ExchangeError(f"cannot write {path}: it is not a regular file")
    write_atomically(path, export_text(store, session_id, kind, whole_tree=whole_tree))
    return given
