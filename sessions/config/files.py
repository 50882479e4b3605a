"""Reading and writing ``config.toml`` without ever stopping the program or losing edits.

Loading never raises: a missing file means defaults, a broken one means defaults plus a
``ConfigProblem`` that says where. Saving is atomic (temp file + rename) so a crash
mid-write cannot leave half a file. ``save_config`` writes only the values that differ
from the defaults, so a future release's better default reaches users who never chose
otherwise; ``update_config`` changes single values in place and keeps everything else
the user wrote (unknown keys and, whenever the edit is simple, comments and layout).
"""

from __future__ import annotations

import copy
import re
import tomllib
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

import tomli_w

from sessions import paths
from sessions.bounded_read import read_regular_file
from sessions.config.model import Config
from sessions.config.sizes import size_text
from sessions.config.toml_text import set_value
from sessions.config.validate import (
    MAX_BATCH,
    MIN_BATCH,
    TABLES,
    TOP_RULES,
    ConfigProblem,
    Rule,
    build_config,
    check_value,
)
from sessions.durable import write_atomically
from sessions.errors import LlamachatError


class ConfigError(LlamachatError):
    """The config file cannot be written as asked; the message says why in plain words."""


@dataclass(frozen=True)
class LoadedConfig:
    """The settings in effect plus everything that was wrong with the file."""

    config: Config
    problems: list[ConfigProblem] = field(default_factory=list)
    path: Path | None = None
    """The file that was read (it may not exist)."""
    batch_wanted: int | None = None
    """The ``n_batch`` the file sets, before a smaller ``n_ctx`` of the file brought it
    down (None: the file leaves it to its default). A ``-c`` that replaces that context
    starts again from this."""


def _resolve(path: Path | str | None) -> Path:
    return Path(path).expanduser() if path is not None else paths.config_file()


def _syntax_problem(error: tomllib.TOMLDecodeError) -> ConfigProblem:
    text = str(error)
    found = re.search(r"at line (\d+)", text)
    return ConfigProblem(f"TOML syntax error: {text}; using all defaults",
                         line=int(found.group(1)) if found else None, fatal=True)


MAX_CONFIG_BYTES = 4 * 1024 * 1024
"""A config file larger than this is not one a person wrote."""


def _read_text(path: Path) -> str | None:
    """The file's text; None when there is none. A FIFO or a device is refused
    (``NotRegularFile``) instead of waiting for a writer or reading for ever."""
    try:
        return read_regular_file(path, MAX_CONFIG_BYTES).decode("utf-8")
    except FileNotFoundError:
        return None


def _reason(error: OSError | UnicodeDecodeError) -> str:
    return error.strerror if isinstance(error, OSError) and error.strerror else str(error)


def load_config(path: Path | str | None = None) -> LoadedConfig:
    """Read the config file; never raises for anything wrong with the file itself."""
    path = _resolve(path)
    try:
        text = _read_text(path)
    except (OSError, UnicodeDecodeError) as error:
        problem = ConfigProblem(f"cannot read {path}: {_reason(error)}; using all defaults", fatal=True)
        return LoadedConfig(Config(), [problem], path)
    if text is None:
        return LoadedConfig(Config(), [], path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        return LoadedConfig(Config(), [_syntax_problem(error)], path)
    config, problems = build_config(data, text)
    wanted = data.get("n_batch")
    batch_ok = isinstance(wanted, int) and not isinstance(wanted, bool) and MIN_BATCH <= wanted <= MAX_BATCH
    return LoadedConfig(config, problems, path, wanted if batch_ok else None)


def to_toml_dict(config: Config, *, everything: bool = False) -> dict[str, Any]:
    """The mapping written to disk: only non-default values unless ``everything``."""
    defaults = Config()
    data: dict[str, Any] = {}
    for f in fields(config):
        value, default = getattr(config, f.name), getattr(defaults, f.name)
        if is_dataclass(value):
            rules = TABLES[f.name][1]
            table = {sub.name: _written(rules[sub.name], getattr(value, sub.name)) for sub in fields(value)
                     if everything or getattr(value, sub.name) != getattr(default, sub.name)}
            if table:
                data[f.name] = table
        elif f.name == "presets":  # [presets.NAME] tables of sampling values
            if value:
                data[f.name] = {name: dict(values) for name, values in value.items()}
        elif f.name == "models":  # [models."NAME"] tables of ModelSettings
            tables = {name: {sub.name: getattr(settings, sub.name) for sub in fields(settings)
                             if getattr(settings, sub.name) is not None}
                      for name, settings in value.items()}
            if tables:
                data[f.name] = tables
        elif value is not None and (everything or value != default):
            data[f.name] = copy.deepcopy(value)
    return data


def write_config_text(path: Path, text: str) -> None:
    """Replace the config file ``path`` with ``text`` in one step; its folder is made private (0700).

    A ``config.toml`` that is a symbolic link (kept with the user's dotfiles) stays one:
    the file it points to is replaced, not the link.
    """
    if path.is_symlink():
        path = path.resolve()
    paths.ensure_private_dir(path.parent)
    write_atomically(path, text)


def save_config(config: Config, path: Path | str | None = None) -> Path:
    """Write ``config`` (its non-default values) over the file; returns the path written.

    This replaces the whole file: keys it does not know and comments are not kept. Use
    ``update_config`` to change a value in a file the user edits by hand.
    """
    path = _resolve(path)
    write_config_text(path, tomli_w.dumps(to_toml_dict(config)))
    return path


def _edits(current: Config, changed: Config, names: list[str]) -> list[tuple[tuple[str, ...], Any]]:
    """The (key path, new value or None to remove) pairs that turn ``current`` into ``changed``.

    A setting changed back to its default is removed, so the file keeps only what the
    user chose (as ``save_config`` does).
    """
    defaults = Config()
    edits: list[tuple[tuple[str, ...], Any]] = []
    for name in names:
        old, new, default = getattr(current, name), getattr(changed, name), getattr(defaults, name)
        if is_dataclass(new):
            rules = TABLES[name][1]
            for sub in fields(new):
                value = getattr(new, sub.name)
                if value != getattr(old, sub.name):
                    value = _checked(rules[sub.name], _written(rules[sub.name], value), f"{name}.{sub.name}")
                    is_default = value == getattr(default, sub.name)
                    edits.append(((name, sub.name), None if is_default else _written(rules[sub.name], value)))
        elif name in ("models", "presets"):
            raise ConfigError(f"the [{name}] tables are edited in the config file itself")
        elif name == "keys":
            for action in sorted(set(old) | set(new)):
                if old.get(action) != new.get(action):
                    value = new.get(action)
                    if value is not None and not isinstance(value, str):
                        raise ConfigError(f"keys.{action} must be a string, not {value!r}")
                    edits.append(((name, action), value))
        else:
            value = None if new is None or new == default else _checked(TOP_RULES[name], new, name)
            edits.append(((name,), value))
    return edits


def _written(rule: Rule, value: Any) -> Any:
    """A field's value as the file holds it: a size in bytes becomes ``"20GiB"`` (a bare
    number in the file is MiB)."""
    return size_text(value) if rule.kind == "size" and isinstance(value, int) else value


def _checked(rule: Any, value: Any, name: str) -> Any:
    checked, reason = check_value(rule, value)
    if reason:
        raise ConfigError(f"{name} {reason}")
    return checked


def _apply(data: dict[str, Any], key_path: tuple[str, ...], value: Any) -> None:
    for part in key_path[:-1]:
        if not isinstance(data.get(part), dict):
            data[part] = {}
        data = data[part]
    if value is None:
        data.pop(key_path[-1], None)
    else:
        data[key_path[-1]] = value


def update_config(*, path: Path | str | None = None, **changes: Any) -> Config:
    """Change some settings in the file and return the resulting config.

    ``update_config(theme="nord")`` rewrites only the ``theme`` line; other keys, unknown
    ones included, stay as the user wrote them. A value of None removes the setting.
    Raises ``ConfigError`` for an invalid value or when the file has a syntax error
    (overwriting it would throw away the user's edits).
    """
    path = _resolve(path)
    known = {f.name for f in fields(Config)}
    unknown = set(changes) - known
    if unknown:
        raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
    try:
        text = _read_text(path) or ""
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read {path}: {_reason(error)}") from error
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"not changing {path}: fix its syntax error first ({error})") from error
    current, _ = build_config(data, text)
    for name, value in changes.items():
        if name in TABLES and value is None:
            changes[name] = TABLES[name][0]()
        elif name in TABLES and isinstance(value, dict):
            try:
                changes[name] = replace(getattr(current, name), **value)
            except TypeError:
                raise ConfigError(f"unknown {name} setting(s) in {sorted(value)}") from None
        elif name == "keys" and value is None:
            changes[name] = {}
    changed = current.with_(**changes)
    expected = copy.deepcopy(data)
    new_text = text
    for key_path, value in _edits(current, changed, list(changes)):
        _apply(expected, key_path, value)
        new_text = set_value(new_text, key_path, value)
    try:
        in_place_ok = tomllib.loads(new_text) == expected
    except tomllib.TOMLDecodeError:
        in_place_ok = False
    if not in_place_ok:
        new_text = tomli_w.dumps(expected)
    write_config_text(path, new_text)
    return build_config(expected, new_text)[0]
