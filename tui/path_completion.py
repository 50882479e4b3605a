"""Completing a typed path with Tab, as a shell does, and the folder it points into.

The typed text keeps its own form (``~/`` stays ``~/``): only the name being typed is
completed, to the longest start the entries of its folder share, and a folder that is the
only match gets its ``/`` so the next Tab goes on inside it. Reading the folder is the
caller's (a thread worker: a folder on a slow disk must not freeze the typing); what is
here only looks at names.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Typed:
    """A typed path split where completion works on it."""

    folder: Path
    """The folder the name is typed in (``~`` expanded)."""
    name: str
    """What is typed of the name in it (empty after a ``/``)."""


def split_typed(text: str) -> Typed:
    """The folder and the start of a name in ``text`` (a relative path is under the current folder)."""
    expanded = os.path.expanduser(text) if text else ""
    if not expanded or expanded.endswith("/"):
        return Typed(Path(expanded or "."), "")
    path = Path(expanded)
    return Typed(path.parent, path.name)


def hidden(name: str, typed: str) -> bool:
    """A dot file is listed only once a name that starts with a dot is typed."""
    return name.startswith(".") and not typed.startswith(".")


def completed(text: str, entries: Sequence[tuple[str, bool]]) -> str | None:
    """``text`` with its name completed from ``entries`` (name, is a folder) of its folder;
    None when nothing there starts with it. Case counts unless only another case matches."""
    name = split_typed(text).name
    shown = [(entry, folder) for entry, folder in entries if not hidden(entry, name)]
    matching = [(entry, folder) for entry, folder in shown if entry.startswith(name)] or \
               [(entry, folder) for entry, folder in shown if entry.casefold().startswith(name.casefold())]
    if not matching:
        return None
    start = os.path.commonprefix([entry for entry, _ in matching])
    if len(matching) == 1 and matching[0][1]:
        start += "/"
    if len(start) < len(name):  # matched in another case only, with nothing more in common
        return None
    return text[: len(text) - len(name)] + start


def keeps(entry: str, typed: str) -> bool:
    """Whether the picker lists ``entry`` while ``typed`` is the start of the name typed:
    its letters in it, in any case (a filter, where completion wants the start)."""
    return not hidden(entry, typed) and typed.casefold() in entry.casefold()
