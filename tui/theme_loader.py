"""Colour themes as data: TOML files turned into Textual themes, plus llamachat's variables.

Themes live in files rather than code so a user can add one (a ``.toml`` file in the
``themes`` folder beside ``config.toml``) without touching the program, and so the
package's own themes are reviewed as palettes, not as Python. A broken file must never
stop the app: it is skipped and described in plain words in the returned problems.

A theme file holds ``name``, ``dark`` and the colour fields of ``textual.theme.Theme``
(``primary`` is required; ``secondary``, ``accent``, ``foreground``, ``background``,
``surface``, ``panel``, ``boost``, ``warning``, ``error``, ``success`` are optional), and
a ``[variables]`` table. Besides Textual's own variables, llamachat's stylesheets use
these, so every theme must define them (``load_themes`` and ``register_themes`` derive
any that are missing from the theme's colours, for Textual's built-in themes too):

- ``user-message-background`` / ``user-message-border``: the user's messages.
- ``assistant-message-background`` / ``assistant-message-border``: the model's replies.
- ``system-message-background`` / ``system-message-foreground``: the system prompt.
- ``tree-active``: the messages on the active branch in the tree panel.
- ``tree-head``: the head marker (where the next message will attach).
- ``saved-mark``: the ``●`` on messages whose model state is saved.
- ``stats-foreground``: quiet secondary text (token counts, times, legends).

Stylesheets reference them as ``$user-message-background`` and so on. Because a
stylesheet that names an unknown variable fails to parse, the app should also return
``default_variables()`` from ``App.get_theme_variable_defaults``.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import replace
from functools import lru_cache
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from textual.app import App
from textual.color import Color, ColorParseError
from textual.theme import BUILTIN_THEMES, Theme

from sessions.api.settings import ConfigError, update_config
from sessions.bounded_read import NotRegularFile, read_regular_file
from sessions.errors import LlamachatError
from sessions.paths import config_dir

MAX_THEME_BYTES = 1024 * 1024
"""A theme file larger than this is not one; it is refused unread."""

LLAMACHAT_VARIABLES: tuple[str, ...] = (
    "user-message-background",
    "user-message-border",
    "assistant-message-background",
    "assistant-message-border",
    "system-message-background",
    "system-message-foreground",
    "tree-active",
    "tree-head",
    "saved-mark",
    "stats-foreground",
)
COLOUR_FIELDS = ("primary", "secondary", "accent", "foreground", "background", "surface",
                 "panel", "boost", "warning", "error", "success")
NUMBER_FIELDS = ("luminosity_spread", "text_alpha")
FLAG_FIELDS = ("dark", "ansi")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_ALPHA = re.compile(r"^\d+(\.\d+)?%$")
FALLBACK_THEME = "llamachat-dark"


class ThemeFileError(LlamachatError, ValueError):
    """A theme file that cannot be used; the message says what to fix."""


def _check_colour(value: Any, what: str) -> str:
    """``value`` if it is a colour, optionally followed by an opacity such as ``40%``."""
    if not isinstance(value, str) or not value.strip():
        raise ThemeFileError(f"{what} must be a colour in quotes, such as \"#5fa8d3\"")
    colour, _, opacity = value.strip().partition(" ")
    try:
        Color.parse(colour)
    except ColorParseError:
        raise ThemeFileError(
            f"{what} is not a colour: {value!r} (use #rrggbb, rgb(r,g,b) or a colour name)"
        ) from None
    if opacity and not _ALPHA.match(opacity.strip()):
        raise ThemeFileError(f"{what} has an opacity that is not a percentage: {value!r}")
    return value.strip()


def theme_from_data(data: dict[str, Any]) -> Theme:
    """Build a theme from the parsed contents of a theme file; raises ``ThemeFileError``."""
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ThemeFileError('it has no name (add a line such as name = "my-theme")')
    if not _NAME.match(name):
        raise ThemeFileError(f"the name {name!r} may only use letters, digits, '-' and '_'")
    known = {"name", "variables", *COLOUR_FIELDS, *NUMBER_FIELDS, *FLAG_FIELDS}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ThemeFileError(
            f"unknown setting(s) {', '.join(unknown)}; a theme may set name, dark, "
            f"{', '.join(COLOUR_FIELDS)} and a [variables] table"
        )
    if "primary" not in data:
        raise ThemeFileError('it has no primary colour (add a line such as primary = "#5fa8d3")')
    fields: dict[str, Any] = {}
    for key in COLOUR_FIELDS:
        if key in data:
            fields[key] = _check_colour(data[key], f"'{key}'")
    for key in FLAG_FIELDS:
        if key in data:
            if not isinstance(data[key], bool):
                raise ThemeFileError(f"'{key}' must be true or false")
            fields[key] = data[key]
    for key in NUMBER_FIELDS:
        if key in data:
            if not isinstance(data[key], (int, float)) or isinstance(data[key], bool):
                raise ThemeFileError(f"'{key}' must be a number")
            fields[key] = float(data[key])
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        raise ThemeFileError("'variables' must be a table: a [variables] section")
    checked: dict[str, str] = {}
    for key, value in variables.items():
        if not isinstance(value, str):
            raise ThemeFileError(f"variable '{key}' must be text in quotes")
        checked[key] = _check_colour(value, f"variable '{key}'") if key in LLAMACHAT_VARIABLES else value
    return Theme(name=name, variables=checked, **fields)


def _read(path: Path | Traversable) -> str:
    """A theme the user put in their folder may be anything, a FIFO included, which a
    plain read would wait on for ever; one packaged with llamachat is read as it is."""
    if isinstance(path, Path):
        return read_regular_file(path, MAX_THEME_BYTES).decode("utf-8")
    return path.read_text(encoding="utf-8")


def read_theme_file(path: Path | Traversable) -> Theme:
    """Read and check one theme file; raises ``ThemeFileError`` with the reason."""
    try:
        text = _read(path)
    except NotRegularFile:
        raise ThemeFileError("it is not a regular file (a pipe or a device cannot hold a theme)") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ThemeFileError(f"it cannot be read ({getattr(error, 'strerror', None) or error})") from error
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ThemeFileError(f"it is not valid TOML ({error})") from error
    return theme_from_data(data)


def llamachat_variables(theme: Theme) -> dict[str, str]:
    """Values for every llamachat variable, derived from the theme's own colours.

    A colour the theme sets is used as written; one it leaves out comes from Textual's
    colour system (which computes, for instance, a surface from the background).
    """
    return dict(_derived_variables(_palette(theme)))


_PALETTE_FIELDS = ("primary", "secondary", "warning", "error", "success", "accent", "foreground", "background",
                   "surface", "panel", "boost", "dark", "luminosity_spread", "text_alpha", "ansi")
"""What Textual's colour system is made from, besides the theme's variables."""


def _palette(theme: Theme) -> tuple[Any, ...]:
    return (*(getattr(theme, name) for name in _PALETTE_FIELDS), tuple(sorted(theme.variables.items())))


@lru_cache(maxsize=128)
def _derived_variables(palette: tuple[Any, ...]) -> dict[str, str]:
    """``llamachat_variables`` for one palette, worked out once per process: every app
    start registers Textual's twenty-odd built-in themes again, and generating a colour
    system for each was most of what registering them cost. Callers get a copy."""
    *colours, variables = palette
    theme = Theme("palette", **dict(zip(_PALETTE_FIELDS, colours, strict=True)), variables=dict(variables))
    generated = theme.to_color_system().generate()
    colour = {key: getattr(theme, key, None) or generated[key]
              for key in ("primary", "accent", "background", "foreground", "surface", "panel",
                          "success")}
    if theme.ansi:  # terminal palette names: nothing to blend
        return {
            "user-message-background": colour["background"],
            "user-message-border": colour["primary"],
            "assistant-message-background": colour["background"],
            "assistant-message-border": colour["accent"],
            "system-message-background": colour["background"],
            "system-message-foreground": "ansi_bright_black",
            "tree-active": colour["accent"],
            "tree-head": colour["primary"],
            "saved-mark": colour["success"],
            "stats-foreground": "ansi_bright_black",
        }
    parsed = {key: Color.parse(value) for key, value in colour.items()}
    background, foreground = parsed["background"], parsed["foreground"]
    return {
        "user-message-background": background.blend(parsed["primary"], 0.15).hex,
        "user-message-border": parsed["primary"].hex,
        "assistant-message-background": parsed["surface"].hex,
        "assistant-message-border": parsed["accent"].hex,
        "system-message-background": parsed["panel"].hex,
        "system-message-foreground": foreground.blend(background, 0.35).hex,
        "tree-active": parsed["accent"].hex,
        "tree-head": parsed["primary"].hex,
        "saved-mark": parsed["success"].hex,
        "stats-foreground": foreground.blend(background, 0.5).hex,
    }


def with_llamachat_variables(theme: Theme) -> Theme:
    """The theme with any missing llamachat variable filled in (its own values kept)."""
    missing = [name for name in LLAMACHAT_VARIABLES if name not in theme.variables]
    if not missing:
        return theme
    derived = llamachat_variables(theme)
    return replace(theme, variables={**{k: derived[k] for k in missing}, **theme.variables})


def default_variables() -> dict[str, str]:
    """Fallback values for ``App.get_theme_variable_defaults`` (from ``textual-dark``)."""
    return llamachat_variables(BUILTIN_THEMES["textual-dark"])


def _theme_files(folder: Path | Traversable) -> list[Path | Traversable]:
    try:
        entries = [entry for entry in folder.iterdir() if entry.name.endswith(".toml")]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(entries, key=lambda entry: entry.name)


def user_themes_dir() -> Path:
    return config_dir() / "themes"


def load_themes(user_dir: Path | None = None) -> tuple[list[Theme], list[str]]:
    """The package's themes, then the user's (a user theme replaces one of the same name).

    Returns the themes, each with every llamachat variable, and one plain-words problem
    per file that was skipped.
    """
    found: dict[str, Theme] = {}
    problems: list[str] = []
    user_dir = user_themes_dir() if user_dir is None else user_dir
    try:
        user_files = _theme_files(user_dir)
    except OSError as error:
        user_files = []
        problems.append(f"the themes folder {user_dir} cannot be read ({error.strerror or error})")
    for entry in [*_theme_files(files("themes")), *user_files]:
        try:
            theme = read_theme_file(entry)
        except ThemeFileError as error:
            problems.append(f"theme file {entry}: {error}; it was skipped")
            continue
        found[theme.name] = with_llamachat_variables(theme)
    return list(found.values()), problems


def register_themes(app: App, themes: Iterable[Theme] | None = None) -> list[str]:
    """Register llamachat's and the user's themes on ``app``; returns the problems.

    Textual's built-in themes are registered again with llamachat's variables filled
    in, so switching to any of them never leaves a ``$variable`` undefined.
    """
    problems: list[str] = []
    if themes is None:
        themes, problems = load_themes()
    for theme in list(app.available_themes.values()):
        app.register_theme(with_llamachat_variables(theme))
    for theme in themes:
        app.register_theme(with_llamachat_variables(theme))
    return problems


def apply_saved_theme(app: App, config: Any) -> str | None:
    """Switch ``app`` to the config's theme; returns a problem when it is not known."""
    wanted = getattr(config, "theme", None) or FALLBACK_THEME
    if wanted in app.available_themes:
        app.theme = wanted
        return None
    fallback = FALLBACK_THEME if FALLBACK_THEME in app.available_themes else app.theme
    app.theme = fallback
    return (f"the theme {wanted!r} named in the config file is not installed, so {fallback!r} "
            f"is used; known themes: {', '.join(sorted(app.available_themes))}")


def remember_theme(name: str) -> str | None:
    """Save the chosen theme in the config file; returns a problem instead of raising."""
    try:
        update_config(theme=name)
    except ConfigError as error:
        return f"the theme choice was not saved: {error}"
    except OSError as error:
        return f"the theme choice was not saved: {error.strerror or error}"
    return None
