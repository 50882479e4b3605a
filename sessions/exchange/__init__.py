"""Getting sessions out of llamachat and conversations in from elsewhere.

Exports: a readable Markdown transcript, and a lossless JSON copy. Imports: our own JSON,
the llama.cpp web UI's conversation export, and ChatGPT's ``conversations.json``; the
format is recognised from the file's content, not its name. Each session is imported
whole or not at all; in a file of many conversations, one that cannot be read is skipped
and said so (``Imported.skipped``), the others imported.
May import the store and the config; never the engine or the controller.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sessions.bounded_read import FileTooLarge, NotRegularFile, read_regular_file
from sessions.exchange.builder import ExchangeError, Imported, ImportStopped, Skipped, StopCheck
from sessions.exchange.chatgpt import import_chatgpt, looks_like_chatgpt
from sessions.exchange.export_file import ExportKind, export_text, write_export
from sessions.exchange.json_format import FORMAT, export_json, import_json
from sessions.exchange.llamacpp_webui import import_webui, looks_like_webui
from sessions.exchange.markdown import export_markdown
from sessions.sampling import SamplingSettings
from sessions.store import SessionStore

MAX_IMPORT_BYTES = 512 * 1024 * 1024
"""The largest file an import reads. The biggest real chat exports (a ChatGPT
``conversations.json`` of years of use) run to a few hundred MB; parsed, a file takes
several times its size in memory, so anything larger is refused before it is read."""

__all__ = [
    "ExchangeError",
    "ExportKind",
    "ImportStopped",
    "Imported",
    "Skipped",
    "MAX_IMPORT_BYTES",
    "detect_format",
    "export_json",
    "export_markdown",
    "export_text",
    "import_data",
    "import_file",
    "write_export",
]


def detect_format(data: Any) -> str:
    """``"llamachat"``, ``"llamacpp-webui"`` or ``"chatgpt"``; ``ExchangeError`` otherwise."""
    if isinstance(data, dict) and isinstance(data.get("format"), str):
        if data["format"] == FORMAT:
            return "llamachat"
        raise ExchangeError(f"unknown file format {data['format']!r}")
    if isinstance(data, list) and not data:
        raise ExchangeError("the file holds an empty list: there is nothing to import")
    if looks_like_webui(data):
        return "llamacpp-webui"
    if looks_like_chatgpt(data):
        return "chatgpt"
    raise ExchangeError(
        "not a format llamachat can import: expected a llamachat session, a llama.cpp "
        "web UI export ('conv' and 'messages') or a ChatGPT conversations.json ('mapping')"
    )


def import_data(store: SessionStore, data: Any, should_stop: StopCheck | None = None, *,
                sampling: SamplingSettings | None = None) -> Imported:
    """Import already-parsed JSON; returns the ids of the new sessions (and what was skipped).

    ``should_stop`` (see ``builder.save_sessions``) lets a Ctrl+C roll the import back;
    ``sampling`` is what a session whose file names no settings gets (the configured ones).
    """
    kind = detect_format(data)
    if kind == "llamachat":
        return import_json(store, data, should_stop, sampling=sampling)
    if kind == "llamacpp-webui":
        return import_webui(store, data, should_stop, sampling=sampling)
    return import_chatgpt(store, data, should_stop, sampling=sampling)


def import_file(store: SessionStore, path: Path | str, should_stop: StopCheck | None = None, *,
                sampling: SamplingSettings | None = None) -> Imported:
    """Import a file in any supported format; returns the ids of the new sessions (and what
    was skipped, ``Imported.skipped``).

    ``should_stop`` is asked once the file is read, before it is parsed, and then as the import
    goes (``ImportStopped``: nothing was saved).
    """
    path = Path(path)
    raw = _read_import(path)
    if should_stop is not None and should_stop():
        raise ImportStopped()
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as error:
        raise ExchangeError(f"{path.name} is not UTF-8 text") from error
    except json.JSONDecodeError as error:
        raise ExchangeError(
            f"{path.name} is not valid JSON ({error.msg} at line {error.lineno}, column {error.colno})"
        ) from error
    except ValueError as error:  # a number of thousands of digits
        raise ExchangeError(f"{path.name} is not valid JSON ({error})") from error
    except RecursionError:
        raise ExchangeError(f"{path.name} is nested too deeply to be a chat export") from None
    try:
        return import_data(store, data, should_stop, sampling=sampling)
    except ImportStopped:
        raise
    except ExchangeError as error:
        raise ExchangeError(f"{path.name}: {error}") from error



def _read_import(path: Path) -> bytes:
    """The file's bytes, read only from a regular file of at most ``MAX_IMPORT_BYTES``
    (``read_regular_file``: a device would fill the memory, a FIFO wait for a writer)."""
    try:
        return read_regular_file(path, MAX_IMPORT_BYTES)
    except NotRegularFile:
        raise ExchangeError(f"{path.name} is not a regular file") from None
    except FileTooLarge:
        raise ExchangeError(f"{path.name} is larger than any chat export "
                            f"(more than {MAX_IMPORT_BYTES // (1024 * 1024)} MiB)") from None
    except OSError as error:
        raise ExchangeError(f"cannot read {path}: {error.strerror or error}") from error
