"""The Textual application: themes, keymap, and the chat screen; nothing else.

Everything a user does happens on ``ChatScreen`` (and the screens pushed over it); the
chat logic is in ``sessions.controller``. The app only owns what is app-wide: the
themes and the remembered choice of theme, the key overrides from ``[keys]``, and the
bridge from core events to messages.

Asked to end from outside (SIGINT, SIGTERM, or SIGHUP when its terminal goes away), it
leaves as Ctrl+Q does: the reply being written stops at its next token and is stored as stopped,
Textual puts the terminal back as it found it (main screen, no mouse reporting, cursor
shown), and the process ends once the reply is stored, with status 128 + the signal.
The handlers run on the event loop (``add_signal_handler``), not at any bytecode.

It is also the one door text comes in and goes out by: notifications, pastes and the
in-app clipboard pass through ``tui.safe_text`` here, so no widget can put a terminal
escape from a model, a chat file or a paste on the screen.
"""

from __future__ import annotations

import asyncio
import gc
import signal
from collections.abc import Iterable
from typing import Any

from rich.console import RenderableType
from textual import events
from textual.app import App, SystemCommand
from textual.driver import Driver
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.theme import Theme

from sessions.api.chat import SessionController
from sessions.api.settings import Config
from tui.bindings import PALETTE, bindings_for, check_overrides
from tui.commands import ActionCommands
from tui.events import Forwarder
from tui.safe_text import for_input, inert
from tui.screens.chat_screen import ChatScreen
from tui.screens.help_screen import HelpScreen
from tui.startup import StartupRequest
from tui.theme_loader import apply_saved_theme, default_variables, register_themes, remember_theme

FULL_COLLECTION_AFTER = 100
"""Collections of the middle generation before a full one (Python's own: 10)."""


def collect_cycles_less_often() -> None:
    """Full passes of the cycle collector, ten times rarer in the app's process.

    Drawing a streamed reply makes objects that outlive the young generations (cached
    lines and segments, the reply's blocks), so full passes came every second or so while a
    reply streamed, and each walks every live object of the app: the UI thread stops for
    a frame or more each time. Ten times rarer, the garbage in cycles waits longer (a few
    megabytes), and a stream's updates are not held up by the collector. The young
    generations are collected as before. docs/benchmarks.md has the lag with and without."""
    gen0, gen1, _ = gc.get_threshold()
    gc.set_threshold(gen0, gen1, FULL_COLLECTION_AFTER)


class LlamaChatApp(App[None]):
    """Branching chats with a local model."""

    TITLE = "llamachat"
    BINDINGS = bindings_for("app")
    COMMANDS = App.COMMANDS | {ActionCommands}

    def __init__(self, controller: SessionController, *, config: Config | None = None,
                 startup: StartupRequest = StartupRequest(), notices: list[str] | None = None,
                 stop_signals: tuple[int, ...] = ()) -> None:
        self.config = config or Config()
        self._notices = list(notices or [])
        """Shown once the app is up: config problems, a database restored from its backup."""
        self.keymap, self._problems = check_overrides(self.config.keys)
        # Per app: Textual binds the palette and draws it in the footer from this, before any keymap.
        self.COMMAND_PALETTE_BINDING = self.keymap.get(PALETTE.id, PALETTE.key)  # type: ignore[misc]
        super().__init__()
        self.controller = controller
        self.startup = startup
        self.forwarder = Forwarder()
        controller.listener = self.forwarder
        self._stop_signals = stop_signals
        """Signals that end the app as Ctrl+Q does (the entry point, ``tui.entry``, passes ``STOP_SIGNALS``)."""
        self.stopped_by: int | None = None
        """The signal the app was asked to end by, if any."""

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver for this platform; on Linux and macOS, one that a terminal
        going away cannot leave hanging (``tui.terminal_driver``)."""
        driver = super().get_driver_class()
        if driver.__name__ == "LinuxDriver":
            # Imported here: the Linux driver imports termios, which other platforms lack.
            from tui.terminal_driver import TerminalDriver

            return TerminalDriver
        return driver

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Of Textual's own commands, only the theme (the choice is remembered): its Keys,
        Maximize and Screenshot are about Textual, not llamachat (F1 lists every key), and
        its Quit would stand beside llamachat's."""
        yield from (command for command in super().get_system_commands(screen) if command.title == "Theme")

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return default_variables()

    def on_mount(self) -> None:
        collect_cycles_less_often()
        loop = asyncio.get_running_loop()
        for number in self._stop_signals:
            loop.add_signal_handler(number, self.stop_on_signal, number)
        problems = self._notices + list(self._problems) + register_themes(self)
        problem = apply_saved_theme(self, self.config)
        if problem:
            problems.append(problem)
        self.theme_changed_signal.subscribe(self, self._remember_theme)
        self.set_keymap(self.keymap)
        screen = ChatScreen(self.controller, config=self.config, startup=self.startup)
        self.forwarder.target = screen
        self.push_screen(screen)
        for text in problems:
            self.notify(text, severity="warning", timeout=10, markup=False)

    def _remember_theme(self, theme: Theme) -> None:
        if theme.name != self.config.theme:
            self.config = self.config.with_(theme=theme.name)
            problem = remember_theme(theme.name)
            if problem:
                self.notify(problem, severity="warning", markup=False)

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every notification, made inert (they often quote file names and model text)."""
        super().notify(inert(message), title=inert(title), severity=severity, timeout=timeout, markup=markup)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Paste) and not event.is_forwarded:
            event.text = for_input(event.text)  # input boxes draw their text raw
        await super().on_event(event)

    @property
    def clipboard(self) -> str:
        """What ctrl+v pastes inside the app (the terminal's clipboard gets the exact text)."""
        return for_input(self._clipboard)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.keymap))

    async def action_quit(self) -> None:
        self.exit()

    def exit(self, result: Any = None, return_code: int = 0, message: RenderableType | None = None) -> None:
        """Every way out stops the reply being written at its next token (it is stored as
        stopped); the app ends once it is."""
        self.controller.cancel()
        super().exit(result, return_code, message)

    def stop_on_signal(self, number: int) -> None:
        """End as Ctrl+Q does; the process ends once the reply being written is stored."""
        self.stopped_by = number
        self.exit(return_code=128 + number)

    def on_unmount(self) -> None:
        loop = asyncio.get_running_loop()
        for number in self._stop_signals:
            try:
                loop.remove_signal_handler(number)
            except (RuntimeError, ValueError):  # the loop is closing: it drops them itself
                pass


STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
"""In raw mode Ctrl+C is a key, so a SIGINT comes from outside (``kill -INT``), as a
SIGTERM does, and is treated the same."""
