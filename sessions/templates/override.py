"""Chat templates the user chooses over the model's own, and which model each applies to.

Two places set one, as in llama.cpp: ``--chat-template-file FILE`` for one run (every model
loaded in it), and the config's ``[models."NAME"]`` tables for the models whose file
matches ``NAME``, with ``chat_template`` (a built-in template's name, or Jinja text) or
``chat_template_file``. The file is read when the model is loaded, not when the config is,
so editing the template and reloading the model picks the change up. What is read is as
untrusted as a template inside a GGUF: it goes through the same sandbox and probe
(``choice``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessions.bounded_read import FileTooLarge, NotRegularFile, read_regular_file
from sessions.errors import LlamachatError
from sessions.templates.families import BY_NAME

MAX_FILE_BYTES = 1024 * 1024
"""A chat template file larger than this is refused before it is read (see MAX_SOURCE_CHARS)."""
_FEW_KB = "a chat template is a few kilobytes"


class OverrideUnreadable(LlamachatError):
    """The template file cannot be read; the message is the end of a sentence."""


@dataclass(frozen=True)
class TemplateOverride:
    """A chat template the user chose: a file, Jinja text, or a built-in's name."""

    where: str
    """Where it was set, for messages: ``--chat-template-file``, ``[models."x.gguf"]``."""
    file: Path | None = None
    text: str | None = None
    """Jinja text, or the name of a built-in template (``gemma``, ``llama3``, ...)."""

    @property
    def builtin_name(self) -> str | None:
        """The built-in template ``text`` names, if it is a name rather than Jinja."""
        name = (self.text or "").strip()
        return name if name in BY_NAME else None

    def describe(self) -> str:
        """The subject of a sentence about this template: "the chat template in X (...)"."""
        if self.file is not None:
            return f"the chat template in {self.file}"
        return f"the chat template set in {self.where}"

    def read(self) -> str:
        """The Jinja source; ``OverrideUnreadable`` when the file cannot be read as text."""
        if self.file is None:
            return self.text or ""
        try:
            text = _read_limited(self.file).decode("utf-8")
            return text.replace("\r\n", "\n").replace("\r", "\n")  # as read_text() did
        except FileNotFoundError:
            raise OverrideUnreadable("does not exist") from None
        except IsADirectoryError:
            raise OverrideUnreadable("is a folder, not a file") from None
        except UnicodeDecodeError:
            raise OverrideUnreadable("is not UTF-8 text") from None
        except OSError as error:
            raise OverrideUnreadable(f"cannot be read ({error.strerror or error})") from None


def _read_limited(path: Path) -> bytes:
    """At most ``MAX_FILE_BYTES`` of a regular file (``read_regular_file``), or ``OverrideUnreadable``."""
    try:
        return read_regular_file(path, MAX_FILE_BYTES)
    except NotRegularFile:
        raise OverrideUnreadable("is not a regular file (a pipe or a device cannot hold one)") from None
    except FileTooLarge as error:
        size = f"{error.size:,} bytes" if error.size is not None else f"more than {MAX_FILE_BYTES:,} bytes"
        raise OverrideUnreadable(f"is {size} long ({_FEW_KB})") from None


@dataclass(frozen=True)
class ModelTemplateRule:
    """One ``[models."NAME"]`` table that sets a chat template or its variables."""

    pattern: str
    """The table's name: a file name (``*`` and ``?`` allowed) or a path (with a ``/``)."""
    override: TemplateOverride | None = None
    variables: tuple[tuple[str, Any], ...] = ()
    """``chat_template_kwargs``, as pairs (the settings are frozen and hashable)."""

    def matches(self, model: Path) -> bool:
        """Whether ``model`` is the file (or one of the files) this table is about."""
        if "/" in self.pattern or self.pattern.startswith("~"):
            return _same_file(Path(self.pattern).expanduser(), model)
        return fnmatch.fnmatchcase(model.name, self.pattern)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.expanduser().resolve()
    except OSError:
        return False


def override_for(model: Path, *, everywhere: TemplateOverride | None,
                 rules: Sequence[ModelTemplateRule]) -> TemplateOverride | None:
    """The template chosen for ``model``: ``everywhere`` (the command line) first, then the
    table naming its path, then the one naming its file name, then the first pattern."""
    if everywhere is not None:
        return everywhere
    ranked = [r.override for r in _ranked(model, rules) if r.override is not None]
    return ranked[0] if ranked else None


def variables_for(model: Path, *, everywhere: Mapping[str, Any],
                  rules: Sequence[ModelTemplateRule]) -> dict[str, Any]:
    """The template variables for ``model``: ``everywhere`` (the top-level
    ``chat_template_kwargs``, or the command line's), with those of the table naming it
    (ranked as ``override_for`` ranks them) over them. The command line's win over the
    tables too: ``cli.runner.apply_flags`` takes the flag's variables out of them."""
    ranked = [r.variables for r in _ranked(model, rules) if r.variables]
    return {**everywhere, **dict(ranked[0])} if ranked else dict(everywhere)


def _ranked(model: Path, rules: Sequence[ModelTemplateRule]) -> list[ModelTemplateRule]:
    """The tables naming ``model``: its path first, then its file name, then patterns."""
    exact = [r for r in rules if r.matches(model) and not any(c in r.pattern for c in "*?[")]
    ranked = [r for r in exact if "/" in r.pattern or r.pattern.startswith("~")] + exact
    return ranked + [r for r in rules if r.matches(model)]


def resolve_file(text: str, base: Path) -> Path:
    """A template path from the config: ``~`` expanded, relative to the config's folder."""
    path = Path(text).expanduser()
    return path if path.is_absolute() else base / path


def rules_from_config(models: Mapping[str, Any], base: Path) -> tuple[ModelTemplateRule, ...]:
    """The ``[models."NAME"]`` tables that set a template or its variables, in the order
    they were written.

    ``models`` maps each table name to its settings (``chat_template``,
    ``chat_template_file``, ``chat_template_kwargs``); relative files are taken from
    ``base``, the config's folder.
    """
    rules = []
    for pattern, settings in models.items():
        where = f'[models."{pattern}"]'
        file = getattr(settings, "chat_template_file", None)
        text = getattr(settings, "chat_template", None)
        variables = tuple(getattr(settings, "chat_template_kwargs", {}).items())
        override = None
        if file:
            override = TemplateOverride(where, file=resolve_file(file, base))
        elif text:
            override = TemplateOverride(where, text=text)
        if override is not None or variables:
            rules.append(ModelTemplateRule(pattern, override, variables))
    return tuple(rules)
