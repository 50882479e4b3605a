"""What a subcommand gets besides its arguments: the config, output streams, the store.

The store is opened only when a command asks for it, so ``llamachat models`` or
``llamachat config --path`` never create a database. Everything printed through it goes
to a terminal as often as not, and much of it (titles, message text, model names) is
untrusted: ``print`` and ``note`` make control characters visible and ``print_json``
escapes the few JSON leaves raw (see ``sessions.text_safety``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from sessions.api.library import SessionStore
from sessions.api.settings import Config
from sessions.cli.interrupts import silence_stderr
from sessions.text_safety import inert, json_for_terminal


@dataclass
class CommandContext:
    config: Config
    """Settings from config.toml with the command-line overrides applied."""
    config_path: Path
    out: TextIO
    err: TextIO
    _store: SessionStore | None = field(default=None, repr=False)

    def store(self) -> SessionStore:
        if self._store is None:
            self._store = SessionStore.open()
            if self._store.recovery_notice:
                self.note(f"warning: {self._store.recovery_notice}")
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def print(self, *parts: Any) -> None:
        print(*(inert(str(part)) for part in parts), file=self.out)

    def print_json(self, value: Any) -> None:
        print(json_for_terminal(json.dumps(value, indent=2, ensure_ascii=False)), file=self.out)

    def note(self, message: str) -> None:
        """A remark for the person at the terminal (stderr, so pipes get only data)."""
        tell(self.err, f"llamachat: {inert(str(message))}")


def tell(err: TextIO | None, line: str) -> None:
    """Print ``line`` on stderr, if it can still be written.

    A terminal that went away cannot take it: what the command did stands, and the line
    is dropped rather than turned into a failure of its own.
    """
    if err is None:  # started with stderr closed: ``print`` would write to stdout
        return
    try:
        print(line, file=err)
    except (OSError, ValueError):
        silence_stderr()
