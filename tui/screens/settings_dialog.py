"""The open chat's settings: its system prompt and how its replies are sampled.

The values are checked with the rules of the config file's ``[sampling]`` table
(``sessions.config.sampling_input``), so the dialog refuses what ``config.toml`` would,
in the same words, and names the field. Beside each value it says where the value came
from (``sampling_sources``: the model's recommended settings, the config, the built-in
default, a preset, this chat), and a preset (the model's, or one of the user's
``[presets.NAME]``) fills the values it names. The chat template in use, and where it comes
from, is shown here too: it is what the system prompt and every message are wrapped in.
The dialog only returns the new settings; the screen applies them (a new system prompt
starts a new branch, see ``sessions.controller.chat_settings``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select, Static, TextArea

from sessions.api.chat import ChatSettings
from sessions.api.settings import SAMPLING_LABELS, SamplingValueError, parse_sampling_value
from sessions.sampling import SamplingSettings
from sessions.sampling_presets import Preset
from sessions.sampling_presets import sources as sampling_sources
from tui.safe_text import for_input, inert

FIELDS = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "max_tokens", "seed")
"""The sampling settings offered, in the order shown."""
HINTS = {"temperature": "0: always the likeliest token", "top_k": "0: off", "top_p": "1: off", "min_p": "0: off",
         "repeat_penalty": "1: off", "max_tokens": "longest reply", "seed": "-1: a new one each reply"}
PROMPT_NOTE = "A new system prompt starts a new branch from the top; the branch you are on stays."


def shown_value(value: float | int) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


class ChatSettingsScreen(ModalScreen[ChatSettings | None]):
    """Edit the chat's system prompt and sampling; dismisses with the new settings, or None."""

    CSS_PATH = "modals.tcss"
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="settings.cancel")]
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (60, "-wide")]
    """Under 60 columns two fields a row leave a value too few columns to be read."""

    def __init__(self, settings: ChatSettings, *, template: str | None = None,
                 defaults: SamplingSettings | None = None, model: Preset | None = None,
                 presets: Mapping[str, Preset] | None = None) -> None:
        """``defaults``: the config's sampling; ``model``: the loaded model's recommended
        settings; ``presets``: the user's own, by name."""
        super().__init__()
        self._settings = settings
        self._template = template
        """Where the loaded model's chat template comes from (None: no model loaded)."""
        self._defaults, self._model = defaults or SamplingSettings(), model
        self._presets = {**({model.name: model} if model is not None else {}), **(presets or {})}
        """Every preset offered, the model's first."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog", classes="wide"):
            yield Label("Chat settings", id="dialog-question")
            yield Label("System prompt", classes="settings-heading")
            yield Label(Text(PROMPT_NOTE), classes="settings-note")
            yield TextArea(for_input(self._settings.system_prompt or ""), id="settings-system",
                           soft_wrap=True, show_line_numbers=False, tab_behavior="focus")
            yield Label("Sampling", classes="settings-heading")
            if self._presets:
                yield Select([(name, name) for name in self._presets], prompt="Apply a preset…",
                             id="settings-preset", compact=True)
            with Grid(id="settings-sampling"):
                for name in FIELDS:
                    yield Label(SAMPLING_LABELS[name], classes="settings-label")
                    value = shown_value(getattr(self._settings.sampling, name))
                    yield Input(value, id=f"settings-{name}", compact=True, tooltip=HINTS[name],
                                select_on_focus=True)
                    yield Static("", id=f"source-{name}", classes="settings-source")
            template = self._template or "known once a model is loaded"
            yield Static(Text(f"Chat template: {inert(template)}"), id="settings-template")
            yield Static("", id="dialog-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Save", variant="primary", id="dialog-yes")
                yield Button("Cancel", id="dialog-no")

    def on_mount(self) -> None:
        self.query_one("#settings-system", TextArea).focus()
        self._say_sources()

    def source_of(self, name: str) -> str:
        """Where the value shown for ``name`` came from, as the dialog says it."""
        return str(self.query_one(f"#source-{name}", Static).render())

    def _typed(self) -> SamplingSettings:
        """The settings as typed, the chat's own where a box holds no valid value."""
        values = {}
        for name in FIELDS:
            try:
                values[name] = parse_sampling_value(name, self.query_one(f"#settings-{name}", Input).value)
            except SamplingValueError:
                continue
        return self._settings.sampling.with_(**values)

    def _say_sources(self) -> None:
        said = sampling_sources(self._typed(), self._defaults, self._model, self._presets)
        for name in FIELDS:
            self.query_one(f"#source-{name}", Static).update(Text(inert(said[name])))

    @on(Input.Changed)
    def _value_changed(self) -> None:
        self._say_sources()

    @on(Select.Changed, "#settings-preset")
    def _preset_chosen(self, event: Select.Changed) -> None:
        preset = self._presets.get(str(event.value)) if event.value is not Select.BLANK else None
        if preset is None:
            return
        for name, value in preset.values.items():
            if name in FIELDS:
                self.query_one(f"#settings-{name}", Input).value = shown_value(value)
        self._say_sources()

    def sampling(self) -> SamplingSettings:
        """The sampling settings as typed; ``SamplingValueError`` names the first bad one."""
        values = {}
        for name in FIELDS:
            box = self.query_one(f"#settings-{name}", Input)
            try:
                values[name] = parse_sampling_value(name, box.value)
            except SamplingValueError:
                box.focus()
                raise
        kept = {f.name: getattr(self._settings.sampling, f.name) for f in fields(SamplingSettings)}
        return SamplingSettings(**{**kept, **values})

    @on(Input.Submitted)
    @on(Button.Pressed, "#dialog-yes")
    def _save(self, event: Input.Submitted | Button.Pressed) -> None:
        event.stop()
        try:
            sampling = self.sampling()
        except SamplingValueError as error:
            self.query_one("#dialog-error", Static).update(Text(str(error)[:1].upper() + str(error)[1:] + "."))
            return
        prompt: str | None = self.query_one("#settings-system", TextArea).text
        original = self._settings.system_prompt
        if original is not None and prompt == for_input(original):
            prompt = original  # untouched: what the box shows is only the prompt made safe to draw
        self.dismiss(ChatSettings(prompt if prompt and prompt.strip() else None, sampling))

    @on(Button.Pressed, "#dialog-no")
    def action_cancel(self) -> None:
        self.dismiss(None)
